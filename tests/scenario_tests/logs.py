"""Failure logs for the scenario tests, from the synthetic multi-rank generator."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

from tests.fixtures.multirank import GPUS_PER_HOST, host_of, write_job

WORLD = 256
# Tests share one server and store: each failure gets a culprit on a host of its own, so that one test's
# incident is not another's repeat (the fingerprint holds the culprit host).
_RANKS = itertools.count(3, GPUS_PER_HOST)


def next_culprit() -> tuple[int, str]:
    rank = next(_RANKS) % WORLD
    return rank, host_of(rank)


# One line of ordinary training chatter, used to pad a log to a realistic size before its failure.
CHATTER = (
    "[rank{r}]:[2026-11-29 02:{m:02d}:{s:02d}] iteration {i:>7} | loss 2.3{d:02d} | lr 3.0e-04"
    " | grad_norm 0.9{d:02d}\n"
)


def oom_log(rank: int) -> bytes:
    """A job where `rank` ran out of CUDA memory (one interleaved train.log)."""
    with tempfile.TemporaryDirectory() as folder:
        write_job(Path(folder), WORLD, "interleaved", "oom", rank)
        return (Path(folder) / "train.log").read_bytes()


def xid_logs(rank: int) -> dict[str, bytes]:
    """A job dying of an Xid on the host of `rank`: train.log plus that node's kernel log."""
    with tempfile.TemporaryDirectory() as folder:
        write_job(Path(folder), WORLD, "interleaved", "xid", rank)
        return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir())}


def padded(log: bytes, size: int) -> bytes:
    """`log` preceded by training chatter until the whole is about `size` bytes."""
    lines = []
    total = len(log)
    i = 0
    while total < size:
        line = CHATTER.format(r=i % 16, m=(i // 60) % 60, s=i % 60, i=i, d=i % 100)
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines).encode() + log


def stuck_log(rank: int) -> bytes:
    """Every rank timed out and nothing in the job's own log says why (`unknown`, no culprit)."""
    with tempfile.TemporaryDirectory() as folder:
        write_job(Path(folder), WORLD, "interleaved", "all-stuck", rank)
        return (Path(folder) / "train.log").read_bytes()
