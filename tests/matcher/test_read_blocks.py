"""iter_blocks: whole lines, line numbers, cleaning, cut lines, bounded memory on large streams."""

from __future__ import annotations

import gzip
import io
import tracemalloc
from pathlib import Path

from matcher.reading.read import Block, ReadLimits, Source, iter_blocks, iter_sources


def source_of(data: bytes, name: str = "mem.log") -> Source:
    return Source(name, opener=lambda: io.BytesIO(data))  # type: ignore[arg-type, return-value]


def lines_with_numbers(blocks: list[Block]) -> list[tuple[int, bytes]]:
    out = []
    for block in blocks:
        for offset, line in enumerate(block.data.split(b"\n")[:-1]):
            out.append((block.first_lineno + offset, line))
    return out


def test_blocks_hold_whole_lines_and_number_them_like_an_editor() -> None:
    data = b"".join(b"line %d\n" % i for i in range(1, 1001))
    blocks = list(iter_blocks(source_of(data), ReadLimits(block_bytes=100)))
    assert len(blocks) > 50
    assert all(block.data.endswith(b"\n") for block in blocks)
    assert b"".join(block.data for block in blocks) == data
    assert lines_with_numbers(blocks) == [(i, b"line %d" % i) for i in range(1, 1001)]


def test_truncated_last_line_gets_a_newline() -> None:
    blocks = list(iter_blocks(source_of(b"a\nb\nunfinished")))
    assert b"".join(b.data for b in blocks) == b"a\nb\nunfinished\n"
    assert lines_with_numbers(blocks)[-1] == (3, b"unfinished")


def test_crlf_and_carriage_returns_do_not_change_line_numbers() -> None:
    data = b"one\r\ntwo\r\nbar 1%\rbar 50%\rthree\n"
    blocks = list(iter_blocks(source_of(data)))
    assert [n for n, _ in lines_with_numbers(blocks)] == [1, 2, 3]
    assert b"".join(b.data for b in blocks) == data


def test_nul_bytes_and_ansi_codes_are_removed() -> None:
    data = b"\x1b[31mred\x1b[0m\n\x00\x00plain\x00\n\x1b[2K\x1b[Acursor\n\x1b]0;title\x07osc\n"
    blocks = list(iter_blocks(source_of(data), ReadLimits(block_bytes=7)))
    assert lines_with_numbers(blocks) == [(1, b"red"), (2, b"plain"), (3, b"cursor"), (4, b"osc")]


def test_long_lines_are_cut_not_fatal() -> None:
    data = b"short\n" + b"x" * 1000 + b"\nafter\n" + b"y" * 300 + b"\n" + b"z" * 5000
    blocks = list(iter_blocks(source_of(data), ReadLimits(max_line_bytes=100, block_bytes=64)))
    assert lines_with_numbers(blocks) == [
        (1, b"short"),
        (2, b"x" * 100),
        (3, b"after"),
        (4, b"y" * 100),
        (5, b"z" * 100),
    ]


def test_long_lines_inside_one_block_are_cut() -> None:
    pieces = [b"a" * 5, b"b" * 200, b"c" * 50, b"d" * 51, b"e" * 49, b"f" * 1000, b""]
    data = b"\n".join(pieces)
    [block] = iter_blocks(source_of(data), ReadLimits(max_line_bytes=50, block_bytes=1 << 20))
    assert block.data.split(b"\n")[:-1] == [p[:50] for p in pieces[:-1]]


def test_a_gigantic_line_without_newline_uses_bounded_memory() -> None:
    class Endless(io.RawIOBase):
        def __init__(self, total: int) -> None:
            self.left = total

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def, override]
            n = min(len(buffer), self.left)
            buffer[:n] = b"q" * n
            self.left -= n
            return n

    source = Source("endless", opener=lambda: Endless(64 * 1024 * 1024))  # type: ignore[arg-type, return-value]
    tracemalloc.start()
    try:
        blocks = list(iter_blocks(source, ReadLimits(block_bytes=1 << 20, max_line_bytes=1000)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [b.data for b in blocks] == [b"q" * 1000 + b"\n"]
    assert peak < 16 * 1024 * 1024


class GeneratedLog(io.RawIOBase):
    """A multi-rank NCCL-style log of `total` bytes, produced on the fly (never held in memory).

    It cycles through a 1 MiB template of whole lines so that producing it costs nothing next to reading.
    """

    TEMPLATE = b"".join(
        b"gpu-node-%03d:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM\n"
        % (rank // 8, 4000 + rank, 4100 + rank, rank % 8, i % 32, rank, i % 8, (rank + 1) % 512, i % 8)
        for rank in range(512)
        for i in range(16)
    )

    def __init__(self, total: int) -> None:
        self.left = total
        self.offset = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def, override]
        want = min(len(buffer), self.left, len(self.TEMPLATE) - self.offset)
        buffer[:want] = self.TEMPLATE[self.offset : self.offset + want]
        self.offset = (self.offset + want) % len(self.TEMPLATE)
        self.left -= want
        return want


def test_large_stream_from_stdin_in_bounded_memory() -> None:
    total = 256 * 1024 * 1024
    limits = ReadLimits(block_bytes=4 * 1024 * 1024)
    tracemalloc.start()
    try:
        lines = 0
        size = 0
        for source in iter_sources(["-"], limits, stdin=GeneratedLog(total)):  # type: ignore[arg-type]
            for block in iter_blocks(source, limits):
                lines += block.data.count(b"\n")
                size += len(block.data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size >= total  # every byte came through (plus a newline if the end was cut)
    assert lines > 2_000_000
    assert peak < 32 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB for a {total / 2**20:.0f} MiB stream"


def test_large_gzip_file_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.log.gz"
    generated = GeneratedLog(128 * 1024 * 1024)
    with gzip.open(path, "wb", compresslevel=1) as out:
        while chunk := generated.read(8 * 1024 * 1024):
            out.write(chunk)
    tracemalloc.start()
    try:
        size = sum(len(b.data) for s in iter_sources([str(path)]) for b in iter_blocks(s))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 <= size - 128 * 1024 * 1024 <= 1  # plus the newline that ends a cut last line
    assert peak < 32 * 1024 * 1024


def test_a_long_run_of_progress_bars_keeps_the_message_at_its_end() -> None:
    from matcher.reading.prefixes import parse_line

    bars = b"".join(
        b"\rEpoch 0: %3d%%|#####     | %d/1000 [00:10<02:40, 5.85it/s]" % (i % 100, i) for i in range(3000)
    )
    message = (
        b"[rank3]:[E1129 03:11:40.0 ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout"
    )
    data = b"before\n" + bars + message + b"\nafter\n"
    for block_bytes in (1 << 20, 4096):  # the whole line in one block, and streamed across many
        blocks = list(iter_blocks(source_of(data), ReadLimits(max_line_bytes=1000, block_bytes=block_bytes)))
        numbered = lines_with_numbers(blocks)
        assert [n for n, _ in numbered] == [1, 2, 3]
        assert len(numbered[1][1]) <= 1000
        line = parse_line(numbered[1][1], source_of(b""), 2)
        assert (line.rank, line.text) == (3, "Watchdog caught collective operation timeout")
