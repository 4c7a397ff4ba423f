"""Bare symptoms and quoted settings (matcher/priors.toml): a paste that holds only a launcher's, a
teardown's or a store's report, or only a setting the user suspected, gets a ranked guess (or `unknown`
first with what to check next), never `unknown` alone; and none of it ever moves a bundle that has a root
line, a cross-rank verdict or a Flight Recorder finding."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from matcher.analysis import crossrank, priors
from matcher.analysis.analyze import _symptom
from matcher.analysis.rankmap import build_rank_map
from matcher.model import Diagnosis
from matcher.pipeline import diagnose
from matcher.reading.read import ReadLimits, iter_sources
from matcher.scanning.catalog import load_catalog
from matcher.scanning.scan import scan
from tests.fixtures.flight_recorder import fr_entry
from tests.matcher.excerpts import class_ids, diagnose_text

# paste -> (context that applies, first class, a class listed after it)
BARE = {
    # A range of killed tasks; one task killed is srun's record of the first failure (test_exit_records).
    "srun: error: node12: tasks 3-4: Killed\n": (
        "srun-task-killed-alone",
        "system/host-oom",
        "network/peer-exit",
    ),
    "slurmstepd: error: *** JOB 98765 ON dgx-02 CANCELLED AT 2026-11-29T03:12:00 DUE TO TIME LIMIT ***\n"
    "srun: error: dgx-02: tasks 0-7: Terminated\n": (
        "stopped-from-outside",
        "unknown",
        "network/interface-selection",
    ),
    "srun: error: Node failure on gpu-node-017\n": ("node-lost-alone", "unknown", "system/host-oom"),
    "Status: Failed Reason: Evicted Message: Pod The node had condition: [DiskPressure].\n": (
        "pod-evicted-alone",
        "unknown",
        "shm/dev-shm",
    ),
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n": (
        "launcher-failure-alone",
        "unknown",
        "config/version-mismatch",
    ),
    "RuntimeError: NCCL communicator was aborted on rank 3.\n": (
        "abort-or-teardown-alone",
        "unknown",
        "timeout/rank0-only-work",
    ),
    "gpu-c21:48211:48211 [5] proxy.cc:1040 NCCL WARN Proxy Call to rank 5 failed (Connect)\n": (
        "nccl-error-alone",
        "unknown",
        "network/interface-selection",
    ),
    "[rank6]:[W1129 10:15:17.529361055 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=76, "
    "addr=[gpu-node-3]:49202, remote=[gpu-node-0]:29500): failed to recv, got 0 bytes\n": (
        "store-connection-lost-alone",
        "unknown",
        "network/peer-exit",
    ),
    "ConnectionRefusedError: [Errno 111] Connection refused\n": (
        "connection-refused-alone",
        "unknown",
        "rendezvous/store",
    ),
    "RuntimeError: Connection reset by peer\n": ("connection-reset-alone", "unknown", "network/peer-exit"),
    "srun: error: gpu-node-017: task 3: Aborted (core dumped)\n": (
        "worker-aborted-alone",
        "config/version-mismatch",
        "cuda/illegal-access",
    ),
    "prterun noticed that process rank 5 with PID 41211 on node gpu-node-018 exited on\n"
    "signal 11 (Segmentation fault).\n": ("worker-crash-recorded", "config/version-mismatch", "shm/dev-shm"),
    "NCCL_P2P_DISABLE=1 torchrun --nproc-per-node 4 train.py\n": (
        "p2p-setting-no-error",
        "p2p/pcie-acs",
        "config/version-mismatch",
    ),
    "docker run --gpus all --shm-size=1g trainer:latest torchrun train.py\n": (
        "shm-setting-no-error",
        "shm/dev-shm",
        "system/host-oom",
    ),
    "max locked memory       (kbytes, -l) 64\n": (
        "memlock-setting-no-error",
        "system/memlock",
        "network/efa-ofi",
    ),
    "export NCCL_IB_GID_INDEX=3\n": ("gid-setting-no-error", "network/roce-gid", "network/ib-rdma"),
    "gpu-a17:31377:31377 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n": (
        "interface-setting-no-error",
        "network/interface-selection",
        "config/version-mismatch",
    ),
}
CUDA_OOM = (
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
    "capacity of 79.10 GiB of which 1.12 GiB is free.\n"
)


def _context_id(tmp_path: Path, text: str) -> str | None:
    path = tmp_path / "context.log"
    path.write_text(text, encoding="utf-8")
    limits = ReadLimits()
    result = scan(iter_sources([str(path)], limits), load_catalog(), limits)
    observations = list(result.observations)
    rm = build_rank_map(observations, result.sources)
    table = crossrank.judge(observations, rm)
    cascades = [o for o in observations if o.role == "cascade"]
    assert priors.bare(observations, table, None, rm)
    prior = priors.priors().first(priors.context_of(observations, _symptom(cascades, None), table, rm))
    return prior.id if prior is not None else None


@pytest.mark.parametrize("text", list(BARE), ids=[v[0] for v in BARE.values()])
def test_a_bare_symptom_or_quoted_setting_gets_its_context_guess_never_unknown_alone(
    tmp_path: Path, text: str
) -> None:
    context, first, listed = BARE[text]
    assert _context_id(tmp_path, text) == context
    d = diagnose_text(tmp_path, text)
    ranked = class_ids(d)
    assert ranked[0] == first
    assert listed in ranked[1:4]
    assert len(ranked) >= 3
    # A guess looks like one: below the "What would settle it" line; only a launcher's own record of the
    # first failed worker names a culprit, never the guess.
    assert all(score.confidence <= priors.priors().max_confidence for score in d.diagnoses)
    if context == "worker-crash-recorded":
        assert d.culprit is not None and d.culprit.ranks == (5,)
    else:
        assert d.culprit is None


@pytest.mark.parametrize("text", list(BARE), ids=[v[0] for v in BARE.values()])
def test_a_root_line_beside_a_bare_symptom_or_setting_still_decides(tmp_path: Path, text: str) -> None:
    d = diagnose_text(tmp_path, text + CUDA_OOM)
    assert d.primary.class_id == "cuda/oom"
    assert d.primary.confidence > priors.priors().max_confidence


def _status(rank: int, enqueued: int) -> str:
    return (
        f"[rank{rank}]:[E1129 03:11:40.123456789 ProcessGroupNCCL.cpp:1663] [PG ID 0 PG GUID 0(default_pg) "
        f"Rank {rank}]  failure detected by watchdog at work sequence id: {enqueued} PG status: last "
        f"enqueued work: {enqueued}, last completed work: {enqueued - 1}\n"
    )


def _lagging_rank_bundle() -> str:
    return "".join(_status(r, 41 if r == 3 else 42) for r in range(8))


@pytest.mark.parametrize(
    "extra",
    [
        "export NCCL_SOCKET_IFNAME=eth0\n",
        "RuntimeError: NCCL communicator was aborted on rank 3.\n",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n",
    ],
)
def test_a_cross_rank_verdict_is_not_moved_by_a_setting_or_an_aftermath_line(
    tmp_path: Path, extra: str
) -> None:
    plain = diagnose_text(tmp_path, _lagging_rank_bundle(), name="plain.log")
    mixed = diagnose_text(tmp_path, _lagging_rank_bundle() + extra, name="mixed.log")
    assert plain.primary.class_id != "unknown"
    assert mixed.primary.class_id == plain.primary.class_id
    assert mixed.culprit is not None and mixed.culprit.ranks == (3,)


def _diagnose_with_dumps(tmp_path: Path, text: str) -> Diagnosis:
    """Four Flight Recorder dumps in which rank 2 stopped issuing work after #40, beside `text`."""
    paths = []
    for rank in range(4):
        behind = rank == 2
        entries = [fr_entry(40, state="completed")] + ([] if behind else [fr_entry(41, state="scheduled")])
        dump = {
            "version": "2.10",
            "comm_lib_version": "2.27.5",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
            "pg_status": {
                "0": {
                    "last_enqueued_collective": 40 if behind else 41,
                    "last_started_collective": -1,
                    "last_completed_collective": 40,
                }
            },
            "entries": entries,
        }
        path = tmp_path / f"nccl_trace_rank_{rank}"
        path.write_bytes(pickle.dumps(dump, protocol=2))
        paths.append(str(path))
    log = tmp_path / "rank0.log"
    log.write_text(text, encoding="utf-8")
    return diagnose([*paths, str(log)]).diagnosis


@pytest.mark.parametrize(
    "text",
    [
        "srun: error: node12: tasks 3-4: Killed\n",
        "export NCCL_P2P_DISABLE=1\n",
        "RuntimeError: Connection reset by peer\n",
    ],
)
def test_a_flight_recorder_finding_is_not_moved_by_a_bare_symptom_or_setting(
    tmp_path: Path, text: str
) -> None:
    d = _diagnose_with_dumps(tmp_path, text)
    assert d.primary.class_id.startswith("timeout/")
    assert d.culprit is not None and d.culprit.ranks == (2,)


def test_a_spread_context_keeps_unknown_ahead_of_its_best_guess() -> None:
    masses = {"network/peer-exit": 0.3, "system/host-oom": 0.25}
    priors.keep_unknown_first(masses, ["network/peer-exit", "system/host-oom"])
    assert masses["unknown"] == pytest.approx(0.3 / priors.priors().unknown_share)
    already = {"unknown": 2.0, "timeout/straggler-input": 0.3}
    priors.keep_unknown_first(already, ["timeout/straggler-input"])
    assert already["unknown"] == 2.0  # a bundle's own `unknown` mass is never lowered
    weighed = {"timeout/rank0-only-work": 1.5}
    priors.keep_unknown_first(weighed, [])
    assert "unknown" not in weighed  # what the analysis itself weighed is not the context's guess


def test_a_line_that_names_a_class_keeps_the_spread_contexts_out(tmp_path: Path) -> None:
    text = (
        "RuntimeError: NCCL communicator was aborted on rank 3.\n"
        "node-1:4411:4470 [0] misc/socket.cc:55 NCCL WARN socketProgress: Connection closed by remote peer "
        "node-2<48211>\n"
    )
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "network/peer-exit"
