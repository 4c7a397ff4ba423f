"""Spans of a plain file: read by pieces, its blocks are exactly the blocks of the whole file."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from matcher.reading.read import ReadLimits, iter_blocks, iter_sources, plan_spans


def _awkward_log(path: Path) -> None:
    """Short lines, lines longer than the line cap, CR rewrites, NUL padding and ANSI colours."""
    rng = random.Random(7)
    lines = []
    for _ in range(20_000):
        size = rng.randint(0, 200) if rng.random() < 0.97 else rng.randint(5_000, 40_000)
        extra = rng.choice([b"", b"", b"", b"\r", b"\x00\x00", b"\x1b[31m"])
        lines.append(b"x" * size + extra)
    path.write_bytes(b"\n".join(lines))  # no newline at the very end


def _blocks(path: Path, limits: ReadLimits, spans: bool) -> list[tuple[bytes, int]]:
    (source,) = iter_sources([str(path)], limits)
    if not spans:
        return [(b.data, b.first_lineno) for b in iter_blocks(source, limits)]
    found: list[tuple[bytes, int]] = []
    base = 0
    for span in plan_spans(source, limits, first_bytes=50_000, span_bytes=120_000):
        blocks = [(b.data, b.first_lineno) for b in iter_blocks(source, limits, span)]
        found += [(data, lineno + base) for data, lineno in blocks]
        if blocks:
            base += blocks[-1][1] - 1 + blocks[-1][0].count(b"\n")
    return found


@pytest.mark.parametrize("block_bytes,line_bytes", [(64 * 1024, 4096), (16 * 1024, 16 * 1024)])
def test_spans_read_back_to_back_give_the_whole_files_blocks(
    tmp_path: Path, block_bytes: int, line_bytes: int
) -> None:
    path = tmp_path / "job.log"
    _awkward_log(path)
    limits = ReadLimits(block_bytes=block_bytes, max_line_bytes=line_bytes)
    (source,) = iter_sources([str(path)], limits)
    assert len(plan_spans(source, limits, first_bytes=50_000, span_bytes=120_000)) > 5
    assert _blocks(path, limits, spans=True) == _blocks(path, limits, spans=False)


def test_a_small_or_streamed_file_is_one_span(tmp_path: Path) -> None:
    path = tmp_path / "small.log"
    path.write_bytes(b"one line\n")
    (source,) = iter_sources([str(path)])
    assert [(s.begin, s.end) for s in plan_spans(source, ReadLimits(), 1024, 1024)] == [(0, None)]
