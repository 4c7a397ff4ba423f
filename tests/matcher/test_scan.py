"""The scanner over real files read by matcher.reading.read: line numbers, fields, blocks, caps, summaries."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from matcher.model import Observation
from matcher.reading.read import ReadLimits, Source, iter_sources
from matcher.scanning.catalog import load_catalog
from matcher.scanning.scan import MAX_PER_WRITER, scan

CATALOG = load_catalog()

HEALTHY = [
    "gpu-node-001:4000:4071 [0] NCCL INFO Bootstrap : Using ib0:10.1.0.1<0>",
    "gpu-node-001:4000:4071 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
    "[rank0]:I1129 03:00:01.000000 4000 train.py:212] step 1 loss 2.3011 lr 3.0e-04",
    "[rank1]:I1129 03:00:01.000000 4001 train.py:212] step 1 loss 2.3090 lr 3.0e-04",
]
WATCHDOG = (
    "[rank{rank}]:[E1129 03:11:40.611181197 ProcessGroupNCCL.cpp:607] [Rank {rank}] "
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4411, OpType=ALLREDUCE, "
    "NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600093 milliseconds before timing out."
)
OOM = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 3 has a total"
ROOT_CAUSE_BLOCK = [
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "train.py FAILED",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2026-11-29_03:11:45",
    "  host      : gpu-node-017.cluster.local",
    "  rank      : 13 (local_rank: 5)",
    "  exitcode  : -9 (pid: 30257)",
    "  error_file: <N/A>",
    "============================================================",
]


def _scan_text(tmp_path: Path, lines: list[str], limits: ReadLimits | None = None, name: str = "job.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    limits = limits or ReadLimits()
    return scan(iter_sources([str(path)], limits), CATALOG, limits)


def _of(result, signature: str) -> list[Observation]:
    return [o for o in result.observations if o.signature == signature]


def test_observations_carry_line_numbers_ranks_and_typed_fields(tmp_path: Path) -> None:
    lines = HEALTHY * 50 + [WATCHDOG.format(rank=1)] + HEALTHY * 3 + [OOM]
    result = _scan_text(tmp_path, lines)
    (timeout,) = _of(result, "watchdog-collective-timeout")
    assert timeout.line.lineno == 201
    assert timeout.line.rank == 1
    assert timeout.symptom == "collective-timeout" and timeout.role == "cascade"
    assert timeout.fields == {
        "pg_rank": 1,
        "seqnum": 4411,
        "optype": "ALLREDUCE",
        "numel_in": 1024,
        "numel_out": 1024,
        "timeout_ms": 600000,
        "elapsed_ms": 600093,
    }
    (oom,) = _of(result, "cuda-oom-torch")
    assert oom.line.lineno == len(lines)
    assert oom.classes == ("cuda/oom",) and oom.line.rank == 3
    assert oom.fields["bytes"] == "2.50 GiB"
    assert result.stats.lines == len(lines)
    assert result.stats.bytes == (tmp_path / "job.log").stat().st_size


@pytest.mark.parametrize("block_bytes", [64, 300, 1000, 4 * 1024**2])
def test_block_size_changes_nothing(tmp_path: Path, block_bytes: int) -> None:
    """Line numbers, counts and multi-line records are the same whatever the block boundaries."""
    lines = HEALTHY * 7 + ROOT_CAUSE_BLOCK + HEALTHY * 2 + [WATCHDOG.format(rank=0)]
    result = _scan_text(tmp_path, lines, ReadLimits(block_bytes=block_bytes))
    assert result.stats.lines == len(lines)
    (block,) = _of(result, "torchrun-root-cause-block")
    assert block.line.lineno == 28 + 5
    assert block.fields == {
        "host": "gpu-node-017.cluster.local",
        "rank": 13,
        "local_rank": 5,
        "exit_code": -9,
        "pid": 30257,
    }
    (timeout,) = _of(result, "watchdog-collective-timeout")
    assert timeout.line.lineno == len(lines)


def test_record_cut_by_end_of_file_still_matches_what_it_has(tmp_path: Path) -> None:
    result = _scan_text(tmp_path, ROOT_CAUSE_BLOCK[4:10])
    (block,) = _of(result, "torchrun-root-cause-block")
    assert block.fields["rank"] == 13 and block.fields["exit_code"] == -9


def test_repeated_line_is_capped_per_rank_but_every_rank_is_kept(tmp_path: Path) -> None:
    lines = [WATCHDOG.format(rank=7)] * 5000 + [WATCHDOG.format(rank=r) for r in range(600)]
    result = _scan_text(tmp_path, lines)
    timeouts = _of(result, "watchdog-collective-timeout")
    per_rank = {o.line.rank for o in timeouts}
    assert per_rank == set(range(600))
    assert sum(1 for o in timeouts if o.line.rank == 7) == MAX_PER_WRITER
    assert result.stats.lines == 5600


def test_progress_bar_clue_and_message_on_one_physical_line_are_both_seen(tmp_path: Path) -> None:
    glued = (
        "Running tokenizer on dataset:   9%|███▊     | 280000/2969526 [29:55<4:48:08, 155.57 examples/s]"
        "[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800328 "
        "milliseconds before timing out."
    )
    result = _scan_text(tmp_path, [glued])
    (timeout,) = _of(result, "watchdog-collective-timeout")
    assert timeout.fields["timeout_ms"] == 1800000 and timeout.fields["pg_rank"] == 2
    (clue,) = _of(result, "dataset-preprocessing")
    assert "Running tokenizer" in clue.line.text and clue.line.lineno == 1


def test_spliced_ranks_on_one_line_are_attributed_separately(tmp_path: Path) -> None:
    spliced = WATCHDOG.format(rank=4)[:150] + WATCHDOG.format(rank=5)
    result = _scan_text(tmp_path, [spliced])
    ranks = {o.line.rank for o in _of(result, "watchdog-collective-timeout")}
    assert 5 in ranks


def test_summaries_and_stats_cover_every_source(tmp_path: Path) -> None:
    folder = tmp_path / "attempt_0"
    for rank in (0, 1, 2):
        (folder / str(rank)).mkdir(parents=True)
        (folder / str(rank) / "stderr.log").write_text(
            "\n".join([*HEALTHY, WATCHDOG.format(rank=rank).replace("03:11:40", f"03:11:4{rank}")]) + "\n"
        )
    limits = ReadLimits()
    result = scan(iter_sources([str(tmp_path)], limits), CATALOG, limits)
    assert [s.lines for s in result.sources] == [5, 5, 5]
    assert result.stats.lines == 15
    assert result.stats.ranks == 3
    summary = result.sources[2]
    assert summary.rank == 2 and 2 in summary.ranks_seen
    assert summary.first_time is not None and summary.first_time <= summary.last_time  # type: ignore[operator]


def test_flight_recorder_sources_are_not_scanned_and_progress_counts_bytes(tmp_path: Path) -> None:
    text = ("\n".join(HEALTHY * 200) + "\n").encode()
    sources = [
        Source("rank0.log", lambda: io.BytesIO(text)),
        Source("nccl_trace_rank_0", lambda: io.BytesIO(b"\x80\x04not text"), kind="flight-recorder"),
    ]
    seen: list[int] = []
    result = scan(sources, CATALOG, ReadLimits(block_bytes=4096), progress=seen.append)
    assert [s.name for s in result.sources] == ["rank0.log"]
    assert seen == sorted(seen) and seen[-1] == len(text) and len(seen) > 1


def test_pathological_line_cannot_hang_the_scan(tmp_path: Path) -> None:
    """A catastrophically backtracking pattern times out per line instead of hanging: no match, no crash."""
    signatures = tmp_path / "signatures"
    signatures.mkdir()
    (signatures / "slow.toml").write_text(
        """
[[signature]]
id = "nested-quantifier"
classes = ["cuda/oom"]
role = "root"
keywords = ["aaaa"]
pattern = '''(a|aa)+b'''
description = "deliberately exponential"
match = ["aaaab"]
no_match = ["xyz"]
"""
    )
    catalog = load_catalog(signatures)
    line = "a" * 40 + "!"
    started = time.monotonic()
    sources = [Source("evil.log", lambda: io.BytesIO((line + "\n").encode() * 1000))]
    result = scan(sources, catalog, ReadLimits())
    # 1000 lines x 50 ms would be close to a minute: a signature that keeps timing out is given up.
    assert time.monotonic() - started < 8
    assert result.observations == ()
    assert result.stats.lines == 1000


def test_keywords_split_by_a_hard_wrap_are_found_in_small_pasted_excerpts(tmp_path: Path) -> None:
    pasted = [
        "[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation",
        "timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for",
        "RuntimeError: CUDA out of",
        "memory. Tried to allocate 20.00 MiB (GPU 0; 23.65 GiB total capacity)",
        "internal error, NCCL",
        "version 2.14.3",
    ]
    result = _scan_text(tmp_path, pasted)
    (timeout,) = _of(result, "watchdog-collective-timeout")
    assert (
        timeout.line.lineno == 1 and timeout.fields["seqnum"] == 2 and timeout.fields["timeout_ms"] == 1800000
    )
    (oom,) = _of(result, "cuda-oom-torch")
    assert oom.line.lineno == 3 and oom.fields["bytes"] == "20.00 MiB"
    (version,) = _of(result, "nccl-version")
    assert version.fields["nccl_version"] == "2.14.3"


def test_lines_that_match_alone_are_not_glued_again(tmp_path: Path) -> None:
    result = _scan_text(tmp_path, [OOM, OOM.replace("rank3", "rank4")])
    assert [o.line.lineno for o in _of(result, "cuda-oom-torch")] == [1, 2]


def test_nccl_init_lines_of_every_rank_survive_the_repetition_cap(tmp_path: Path) -> None:
    """NCCL lines carry no rank prefix; the cap must still tell 512 writers apart (rank -> host map)."""
    lines = [
        f"gpu-node-{rank // 8:03d}:{4000 + rank}:{4071 + rank} [{rank % 8}] NCCL INFO comm 0x7f{rank:06x} "
        f"rank {rank} nranks 512 cudaDev {rank % 8} busId {rank % 8 + 1}0000 - Init COMPLETE"
        for rank in range(512)
    ]
    result = _scan_text(tmp_path, lines * 3)
    inits = _of(result, "nccl-comm-init-rank")
    assert {(o.fields["rank"], o.line.host) for o in inits} == {
        (r, f"gpu-node-{r // 8:03d}") for r in range(512)
    }


def test_messages_joined_on_one_line_each_give_an_observation(tmp_path: Path) -> None:
    joined = " ".join(WATCHDOG.format(rank=r).split("]:", 1)[1] for r in (1, 2, 6))
    result = _scan_text(tmp_path, [joined])
    assert [o.fields["pg_rank"] for o in _of(result, "watchdog-collective-timeout")] == [1, 2, 6]
