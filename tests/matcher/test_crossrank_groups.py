"""Old watchdog lines name no process group: far-apart SeqNums are different groups, not a laggard."""

from __future__ import annotations

from pathlib import Path

from tests.matcher.excerpts import diagnose_text


def _watchdog(rank: int, seq: int) -> str:
    return (
        f"[E ProcessGroupNCCL.cpp:458] [Rank {rank}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800541 milliseconds "
        "before timing out.\n"
    )


def test_far_apart_seqnums_without_group_names_blame_nobody(tmp_path: Path) -> None:
    # Rank 0 of one group at #81234, rank 3 of another group at #40517: nobody is behind anybody.
    diagnosis = diagnose_text(tmp_path, _watchdog(0, 81234) + _watchdog(3, 40517))
    assert diagnosis.culprit is None


def test_a_rank_one_collective_behind_in_the_same_group_is_still_named(tmp_path: Path) -> None:
    text = "".join(_watchdog(rank, 81234) for rank in (0, 1, 2)) + (
        "[E ProcessGroupNCCL.cpp:458] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=81233, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800113 milliseconds "
        "before timing out.\n"
    )
    diagnosis = diagnose_text(tmp_path, text)
    assert diagnosis.culprit is not None and diagnosis.culprit.ranks == (3,)
