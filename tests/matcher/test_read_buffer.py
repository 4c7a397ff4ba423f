"""The block reader's reusable buffer: short reads gathered, blocks independent of the buffer, and the
same text as reading the input line by line."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matcher.model import InputError
from matcher.reading.read import ReadLimits, Source, clean_block, iter_blocks, iter_sources, shorten_line


class Trickle(io.RawIOBase):
    """A pipe-like stream: at most `step` bytes per read."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data = data
        self.offset = 0
        self.step = step
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def, override]
        self.reads += 1
        piece = self.data[self.offset : self.offset + min(self.step, len(buffer))]
        buffer[: len(piece)] = piece
        self.offset += len(piece)
        return len(piece)


def _log(lines: int) -> bytes:
    return b"".join(b"[rank%d]: step %d loss 2.%04d\n" % (i % 8, i, i * 7919 % 10000) for i in range(lines))


def test_short_reads_are_gathered_into_full_blocks() -> None:
    data = _log(2000)
    stream = Trickle(data, step=7)
    source = Source("pipe", opener=lambda: stream)  # type: ignore[arg-type, return-value]
    blocks = list(iter_blocks(source, ReadLimits(block_bytes=4096, max_line_bytes=200)))
    assert b"".join(b.data for b in blocks) == data
    # Each block but the last holds nearly block_bytes: reads were gathered, not handed out one by one.
    assert all(len(b.data) > 4096 - 200 for b in blocks[:-1])
    assert [b.first_lineno for b in blocks] == [
        1 + sum(x.data.count(b"\n") for x in blocks[:i]) for i in range(len(blocks))
    ]


def test_blocks_are_bytes_that_stay_intact_while_the_reader_moves_on(tmp_path: Path) -> None:
    data = _log(50_000)
    path = tmp_path / "rank0.log"
    path.write_bytes(data)
    limits = ReadLimits(block_bytes=1 << 16)
    [source] = iter_sources([str(path)], limits)
    kept = list(iter_blocks(source, limits))  # all held at once: none may share the reader's buffer
    assert len(kept) > 10
    assert all(type(block.data) is bytes for block in kept)
    assert b"".join(block.data for block in kept) == data


def test_budget_is_charged_by_buffered_reads(tmp_path: Path) -> None:
    path = tmp_path / "big.log.gz"
    path.write_bytes(gzip.compress(_log(20_000)))
    limits = ReadLimits(max_input_bytes=100_000, block_bytes=1 << 20)
    with pytest.raises(InputError, match="larger than 100000 bytes"):
        for source in iter_sources([str(path)], limits):
            for _ in iter_blocks(source, limits):
                pass


def _reference(data: bytes, cap: int) -> bytes:
    """The whole input cut line by line, the straightforward way (no blocks, no buffer)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    cut = [shorten_line(line, line, b"\r" in line, cap) if len(line) > cap else line for line in lines]
    # Small inputs given on their own are read as possible pastes (`read.PASTE_BYTES`).
    return clean_block(b"".join(line + b"\n" for line in cut), cap=len(data) + 1, pasted=True)


PIECES = st.sampled_from([b"\n", b"\r", b"\r\n", b"\x00", b"\x1b[2K", b"x" * 50, b"ab", b"\xff"])


@settings(max_examples=300, deadline=10_000, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.lists(st.one_of(PIECES, st.binary(max_size=30)), max_size=80).map(b"".join),
    block_bytes=st.integers(1, 200),
    cap=st.integers(1, 90),
    step=st.integers(1, 64),
)
def test_blocks_match_a_line_by_line_reading(data: bytes, block_bytes: int, cap: int, step: int) -> None:
    stream = Trickle(data, step)
    source = Source("pipe", opener=lambda: stream)  # type: ignore[arg-type, return-value]
    blocks = list(iter_blocks(source, ReadLimits(block_bytes=block_bytes, max_line_bytes=cap)))
    assert b"".join(block.data for block in blocks) == _reference(data, cap)


class ReadOnly:
    """A stream as `BinaryIO` promises it: `read` and `close`, no `readinto`."""

    def __init__(self, data: bytes) -> None:
        self.inner = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self.inner.read(min(size, 5))

    def close(self) -> None:
        self.inner.close()


def test_a_stream_without_readinto_is_read_too() -> None:
    data = _log(300)
    source = Source("plain", opener=lambda: ReadOnly(data))  # type: ignore[arg-type, return-value]
    blocks = list(iter_blocks(source, ReadLimits(block_bytes=1000)))
    assert b"".join(b.data for b in blocks) == data
    assert len(blocks) > 5
