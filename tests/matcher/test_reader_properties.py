"""Property tests: random and mutated bytes through the reader and the prefix parser.

Whatever the bytes: iter_sources/iter_blocks end normally or with InputError, parse_line returns a Line,
nothing hangs, and line numbering stays exact (every input newline is one line, plus one for an
unterminated last line).
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zipfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matcher.model import InputError, Line
from matcher.reading.prefixes import parse_line, parse_segments
from matcher.reading.read import ReadLimits, Source, iter_blocks, iter_sources

# READER_EXAMPLES raises the example count for a longer local hunt; CI uses the default.
FAST = settings(
    max_examples=int(os.environ.get("READER_EXAMPLES", "150")),
    deadline=10_000,
    suppress_health_check=[HealthCheck.too_slow],
)

# Bytes that stress the reader: line breaks, NUL, ESC sequences, prefixes, invalid UTF-8, long runs.
PIECES = st.sampled_from(
    [
        b"\n",
        b"\r",
        b"\r\n",
        b"\x00",
        b"\x1b[31m",
        b"\x1b]0;t\x07",
        b"\x1b",
        b"[rank3]:",
        b"[default1]:",
        b"  7: ",
        b"gpu-1:2:3 [0] NCCL INFO ",
        b"[E1129 03:11:40.1 x.cpp:1] ",
        b"Nov 29 03:11:40 h kernel: ",
        b" 5%|##| 1/2 [00:01<00:01, 1it/s]",
        b"\xff\xfe",
        b"\xe2\x96",
        b"x" * 70,
        b"Watchdog caught collective operation timeout",
    ]
)
LOG_BYTES = st.one_of(
    st.binary(max_size=600),
    st.lists(st.one_of(PIECES, st.binary(max_size=20)), max_size=60).map(b"".join),
)


def memory_source(data: bytes) -> Source:
    return Source("mem", opener=lambda: io.BytesIO(data))  # type: ignore[arg-type, return-value]


@FAST
@given(data=LOG_BYTES, block_bytes=st.integers(1, 300), cap=st.integers(1, 120))
def test_blocks_keep_exact_line_numbering(data: bytes, block_bytes: int, cap: int) -> None:
    blocks = list(iter_blocks(memory_source(data), ReadLimits(block_bytes=block_bytes, max_line_bytes=cap)))
    expected_lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    assert sum(block.data.count(b"\n") for block in blocks) == expected_lines
    next_line = 1
    for block in blocks:
        assert block.first_lineno == next_line
        assert block.data.endswith(b"\n")
        assert b"\x00" not in block.data
        assert all(len(line) <= cap for line in block.data.split(b"\n"))
        next_line += block.data.count(b"\n")


@FAST
@given(data=LOG_BYTES, lineno=st.integers(1, 10**9), year=st.one_of(st.none(), st.integers(1, 9999)))
def test_parse_line_never_raises(data: bytes, lineno: int, year: int | None) -> None:
    source = Source("s", opener=lambda: io.BytesIO(b""), rank=1, host="h")  # type: ignore[arg-type, return-value]
    line = parse_line(data, source, lineno, year=year)
    assert isinstance(line, Line)
    assert line.lineno == lineno
    assert "\n" not in line.text and "\x00" not in line.text
    assert all(segment.lineno == lineno for segment in parse_segments(data, source, lineno, year=year))


def consume(paths: list[str], stdin: bytes | None = None) -> None:
    """Read everything the way the scanner does; only InputError may escape."""
    limits = ReadLimits(block_bytes=256, max_input_bytes=10_000_000)
    stream = io.BytesIO(stdin) if stdin is not None else None
    try:
        for source in iter_sources(paths, limits, stdin=stream):  # type: ignore[arg-type]
            for block in iter_blocks(source, limits):
                assert block.data.endswith(b"\n")
    except InputError as error:
        assert "\n" not in str(error)


@FAST
@given(data=st.binary(max_size=2000))
def test_random_stdin_bytes(data: bytes) -> None:
    consume(["-"], stdin=data)


def sample_archives() -> list[bytes]:
    members = {"attempt_0/0/stderr.log": b"[rank0]: boom\n" * 20, "r1.log.gz": gzip.compress(b"one\n" * 50)}
    tar_buffer = io.BytesIO()
    with tarfile.open(fileobj=tar_buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    zip_buffer = io.BytesIO()
    with zipfile.ZipFile(zip_buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return [tar_buffer.getvalue(), zip_buffer.getvalue(), gzip.compress(b"[rank1]: x\n" * 100)]


ARCHIVES = sample_archives()


@st.composite
def mutated_archive(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(ARCHIVES)))
    for _ in range(draw(st.integers(1, 8))):
        position = draw(st.integers(0, len(data) - 1))
        data[position] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


@settings(
    FAST, deadline=20_000, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=mutated_archive())
def test_mutated_archives_end_with_input_error_at_worst(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("mut") / "bundle"
    path.write_bytes(data)
    consume([str(path)])
    consume(["-"], stdin=data)
