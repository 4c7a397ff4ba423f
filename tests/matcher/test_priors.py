"""Symptom-context priors (matcher/priors.toml): a ranked, low-confidence guess instead of `unknown` when
the bundle carries a recognisable symptom but no line that names a cause."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from matcher.analysis.priors import PRIORS_FILE, parse_priors, priors
from matcher.scanning.catalog import load_catalog
from tests.matcher.excerpts import class_ids, diagnose_text

WATCHDOG = (
    "[rank{r}]:[E1129 03:11:40.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
    "Timeout(ms)={timeout}) ran for {ran} milliseconds before timing out.\n"
)


def _timeout(rank: int, seq: int, op: str = "ALLREDUCE", numel: int = 1, timeout: int = 1_800_000) -> str:
    return WATCHDOG.format(r=rank, seq=seq, op=op, numel=numel, timeout=timeout, ran=timeout + 57)


def test_the_priors_file_parses_and_rejects_unknown_conditions_and_classes() -> None:
    document = tomllib.loads(PRIORS_FILE.read_text(encoding="utf-8"))
    assert len(parse_priors(document).contexts) >= 10
    bad_condition = {**document, "context": [{**document["context"][0], "when": {"phase_of_moon": "full"}}]}
    with pytest.raises(ValueError, match="phase_of_moon"):
        parse_priors(bad_condition)
    bad_class = {**document, "context": [{**document["context"][0], "classes": {"cuda/oom2": 1.0}}]}
    with pytest.raises(ValueError, match="cuda/oom2"):
        parse_priors(bad_class)


def test_every_signature_a_prior_names_exists_in_the_catalog() -> None:
    ids = {s.id for s in load_catalog().signatures}
    for prior in priors().contexts:
        named = set(prior.when.get("signatures", [])) | set(prior.when.get("without", []))
        assert named <= ids, (prior.id, named - ids)


def test_a_bare_timeout_on_the_first_sync_point_guesses_rank0_work_without_a_culprit(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _timeout(4, 2))
    assert class_ids(d)[0] == "timeout/rank0-only-work"
    assert d.primary.confidence <= priors().max_confidence
    assert d.culprit is None
    assert "unknown" in class_ids(d)
    assert any("Watchdog caught" in e.text for e in d.primary.evidence)


def test_a_bare_mid_run_timeout_on_a_flag_sync_guesses_ranks_that_skipped_it(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _timeout(2, 8812))
    assert class_ids(d)[:2] == ["timeout/asymmetric-collectives", "timeout/rank0-only-work"]
    assert d.culprit is None


def test_a_bare_mid_run_timeout_in_a_large_collective_keeps_unknown_first(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _timeout(2, 8812, numel=2_097_152))
    assert class_ids(d)[0] == "unknown"
    assert {"timeout/asymmetric-collectives", "timeout/straggler-input"} <= set(class_ids(d)[:4])


def test_a_clue_line_keeps_the_guess_out(tmp_path: Path) -> None:
    text = "Saving model checkpoint to /ckpt/step-800\n" + _timeout(3, 2)
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "timeout/rank0-only-work"
    assert d.primary.confidence > priors().max_confidence  # backed by the clue, not by a prior


def test_a_bare_internal_error_suggests_two_nccl_builds_first(tmp_path: Path) -> None:
    text = (
        "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1691\n"
        "internal error - please report this issue to the NCCL developers, NCCL version 2.19.3\n"
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "config/version-mismatch"
    assert d.primary.confidence <= priors().max_confidence


def test_a_lone_remote_error_across_nodes_lists_interface_and_ib_in_the_top_three(tmp_path: Path) -> None:
    text = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317,"
        " remote process exited or there was a network error, NCCL version 2.21.5\n"
    )
    top3 = class_ids(diagnose_text(tmp_path, text))[:3]
    assert set(top3) == {"network/peer-exit", "network/interface-selection", "network/ib-rdma"}


def test_a_connect_refused_during_setup_points_at_the_interface_not_the_peer(tmp_path: Path) -> None:
    text = (
        "node-2:4153:4209 [1] include/socket.h:361 NCCL WARN Call to connect timeout : Connection refused\n"
        "node-2:4153:4209 [1] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
        "node-1<41877>\n"
    )
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "network/interface-selection"
    assert d.culprit is None


def test_a_worker_that_died_by_sigabrt_alone_suggests_an_incompatible_build(tmp_path: Path) -> None:
    text = "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGABRT\n"
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "config/version-mismatch"
    assert d.primary.confidence <= priors().max_confidence


def test_a_worker_that_died_by_sigsegv_alone_suggests_an_incompatible_build(tmp_path: Path) -> None:
    text = "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGSEGV\n"
    assert class_ids(diagnose_text(tmp_path, text))[0] == "config/version-mismatch"


def test_a_store_barrier_timeout_without_counts_suggests_late_ranks_then_rendezvous(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, "timed out initializing process group in store based barrier on rank\n")
    assert class_ids(d)[:2] == ["timeout/rank0-only-work", "rendezvous/store"]


STORE_BARRIER_WAITING = (
    "I0510 07:28:04.417845 139863945226048 distributed_c10d.py:337] Waiting in store based barrier to "
    "initialize process group for rank: {r}, key: store_based_barrier_key:2 (world_size=8, worker_count=7, "
    "timeout=0:30:00)\n"
)


def test_a_paste_that_stops_while_the_store_barrier_waits_guesses_like_a_barrier_timeout(
    tmp_path: Path,
) -> None:
    d = diagnose_text(tmp_path, STORE_BARRIER_WAITING.format(r=2) + STORE_BARRIER_WAITING.format(r=7))
    assert class_ids(d)[:2] == ["timeout/rank0-only-work", "rendezvous/store"]
    assert d.primary.confidence < 0.5 and d.culprit is None  # the waiting rank is no culprit


def test_a_store_barrier_that_completed_after_waiting_is_no_guess(tmp_path: Path) -> None:
    text = STORE_BARRIER_WAITING.format(r=2) + (
        "INFO:torch.distributed.distributed_c10d:Rank 2: Completed store-based barrier for key:"
        "store_based_barrier_key:2 with 8 nodes.\n"
    )
    assert class_ids(diagnose_text(tmp_path, text)) == ["unknown"]


def test_a_store_barrier_timeout_with_a_wrong_worker_count_stays_rendezvous(tmp_path: Path) -> None:
    text = (
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 3, for key: "
        "store_based_barrier_key:1 (world_size=8, worker_count=16, timeout=0:30:00)\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "rendezvous/store"


def test_a_killed_worker_is_never_replaced_by_a_guess(tmp_path: Path) -> None:
    text = _timeout(1, 2) + (
        "E1129 05:12:44.000000 3391 torch/distributed/elastic/multiprocessing/api.py:882] failed "
        "(exitcode: -9) local_rank: 0 (pid: 5120) of binary: /opt/venv/bin/python3\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "system/host-oom"


def test_a_communicator_id_fetch_that_timed_out_lists_rendezvous_and_a_late_rank0(tmp_path: Path) -> None:
    text = (
        "torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId "
        "from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n"
    )
    top2 = set(class_ids(diagnose_text(tmp_path, text))[:2])
    assert top2 == {"timeout/rank0-only-work", "rendezvous/store"}


def test_a_communicator_id_fetch_whose_store_reset_points_at_the_dead_peer(tmp_path: Path) -> None:
    text = (
        "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d "
        "key-value store by key '0', but store->get('0') got error: Connection reset by peer\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "network/peer-exit"


def test_runners_up_never_pass_a_class_the_evidence_names(tmp_path: Path) -> None:
    text = "RuntimeError: NCCL Error 2: unhandled system error\n"
    d = diagnose_text(tmp_path, text)
    backed = [c for c in d.diagnoses if c.evidence]
    assert d.diagnoses[: len(backed)] == tuple(backed)


def test_a_bare_internal_error_lists_a_bug_of_the_nccl_release_in_the_top_three(tmp_path: Path) -> None:
    text = (
        "nodeA: Test NCCL failure common.cu:1012 "
        "'internal error - please report this issue to the NCCL developers / '\n"
    )
    assert "nccl/nvls-or-algorithm" in class_ids(diagnose_text(tmp_path, text))[:3]


def test_a_bare_unhandled_cuda_error_suggests_a_mismatched_build_then_memory_then_the_release(
    tmp_path: Path,
) -> None:
    text = "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n"
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:3] == ["config/version-mismatch", "cuda/oom", "nccl/nvls-or-algorithm"]
    assert d.primary.confidence <= priors().max_confidence
    assert d.culprit is None


PCIE_ONLY_TOPOLOGY = """
$ nvidia-smi topo -m
        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity
GPU0     X      PIX     SYS     SYS     0-23    0
GPU1    PIX      X      SYS     SYS     0-23    0
GPU2    SYS     SYS      X      PXB     24-47   1
GPU3    SYS     SYS     PXB      X      24-47   1
"""


def test_a_pcie_only_topology_without_any_error_is_read_as_a_p2p_problem(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, PCIE_ONLY_TOPOLOGY)
    assert class_ids(d)[0] == "p2p/pcie-acs"
    assert d.primary.confidence <= priors().max_confidence
    assert d.culprit is None


def test_a_topology_with_nvlink_is_no_sign_of_a_pcie_only_machine(tmp_path: Path) -> None:
    text = PCIE_ONLY_TOPOLOGY.replace("GPU1    PIX      X", "GPU1    NV12     X").replace(
        "GPU0     X      PIX", "GPU0     X      NV12"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] != "p2p/pcie-acs"


def test_a_pcie_only_topology_beside_an_error_line_leaves_the_error_in_charge(tmp_path: Path) -> None:
    text = PCIE_ONLY_TOPOLOGY + (
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
        "capacity of 23.65 GiB of which 1.12 GiB is free.\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "cuda/oom"


def test_an_nccl_feature_switch_without_any_error_points_at_the_feature(tmp_path: Path) -> None:
    text = "export NCCL_CUMEM_ENABLE=1\nexport NCCL_DEBUG=WARN\ntraining stops after the first step\n"
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "nccl/nvls-or-algorithm"
    assert d.primary.confidence <= priors().max_confidence


LIGHTNING_INIT = (
    "GPU available: True, used: True\n"
    "initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/2\n"
    "initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/2\n"
)


def test_a_paste_stopping_at_lightnings_init_banner_guesses_builds_then_one_device(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, LIGHTNING_INIT)
    assert class_ids(d)[:3] == ["config/version-mismatch", "config/duplicate-gpu", "rendezvous/store"]
    assert d.primary.confidence <= 0.45
    assert d.culprit is None


def test_training_progress_after_lightnings_init_banner_is_no_init_hang(tmp_path: Path) -> None:
    text = LIGHTNING_INIT + "Epoch 3:  41%|████      | 410/1000 [05:01<07:13,  1.36it/s, loss=0.412]\n"
    assert "config/duplicate-gpu" not in class_ids(diagnose_text(tmp_path, text))[:3]
