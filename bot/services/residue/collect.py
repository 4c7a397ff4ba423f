"""The candidate lines of the residue: error-like lines of a job's logs that no signature recognises.

Only run for `unknown` and low-confidence diagnoses, after the diagnosis, over the same inputs. It reads
each text source's first and last MiBs (errors cluster at a job's start and end): a plain file by
seeking to its end, a stream (compressed, archive member) by reading on, keeping the last MiBs, until
a byte budget is spent. It stops after a fixed number of bytes and seconds in total and keeps a bounded
number of distinct lines, so its cost never grows with the size of the logs. It uses the matcher's
public reading API (`iter_sources`, `parse_line`) and the signature catalog's data, never the scanner's
internals.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from matcher.analysis.redact import clean
from matcher.reading.prefixes import parse_line
from matcher.reading.read import ReadLimits, Source, iter_sources
from matcher.scanning.catalog import Catalog, Signature

HEAD_BYTES = 2 * 1024**2
TAIL_BYTES = 2 * 1024**2
READ_BUDGET_BYTES = 1024**3  # all sources together (a stream's tail costs a pass over it)
TIME_BUDGET_S = 3.0
MAX_SOURCES = 256
MAX_DISTINCT_LINES = 1000
MAX_LINE_BYTES = 4096
CHUNK_BYTES = 1024**2
MATCH_TIMEOUT_S = 0.05

# Words that make a line worth a maintainer's look (exception names such as RuntimeError included).
# NCCL's "WARN" lines carry most of its errors.
ERROR_LIKE = re.compile(
    r"(?:error|exception|fault)s?\b|\b(?:fail(?:ed|ure|s|ing)?|fatal|abort(?:ed|ing)?|timed? ?out|"
    r"timeout|refused|unreachable|denied|rejected|panic|segfault|segmentation|killed|died|dead|"
    r"crash(?:ed)?|traceback|cannot|could not|unable|invalid|corrupt(?:ed)?|mismatch|warn(?:ing)?|lost|"
    r"hung|stuck|unexpected|not found|expired|unhealthy)\b",
    re.IGNORECASE,
)
# Literal cores of ERROR_LIKE, found in the lower-cased raw bytes with `bytes.find` (memchr speed, where a
# regex alternation manages a few MB/s): only the lines holding one are decoded, peeled and checked
# against ERROR_LIKE itself. A test keeps the two lists in step.
KEYWORDS = tuple(
    word.encode()
    for word in (
        "error", "exception", "fault", "fail", "fatal", "abort", "timed out", "time out", "timeout",
        "timedout", "refused", "unreachable", "denied", "rejected", "panic", "segfault", "segmentation",
        "killed", "died", "dead", "crash", "traceback", "cannot", "could not", "unable", "invalid",
        "corrupt", "mismatch", "warn", "lost", "hung", "stuck", "unexpected", "not found", "expired",
        "unhealthy",
    )
)  # fmt: skip
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")


@dataclass(frozen=True, slots=True)
class CandidateLine:
    """`text` is the message after prefix peeling (what is mined), `raw` the line as written (the
    example a maintainer sees); `count` how often the same message occurred."""

    text: str
    raw: str
    source: str
    count: int = 1


class RecognisedLines:
    """Whether any signature of the catalog matches a line, the way the scanner decides it: a keyword
    first (cheap), then the pattern on the peeled text or the raw line."""

    def __init__(self, catalog: Catalog) -> None:
        self._signatures: list[tuple[Signature, tuple[str, ...]]] = [
            (s, tuple(k.casefold() for k in s.keywords) if s.caseless else s.keywords) for s in catalog
        ]

    def __call__(self, text: str, raw: str) -> bool:
        folded = None
        for signature, keywords in self._signatures:
            if signature.caseless:
                folded = folded if folded is not None else f"{text}\n{raw}".casefold()
                haystack = folded
            else:
                haystack = f"{text}\n{raw}"
            if not any(keyword in haystack for keyword in keywords):
                continue
            try:
                pattern = signature.pattern
                if any(pattern.search(t, timeout=MATCH_TIMEOUT_S) for t in (text, raw)):
                    return True
            except TimeoutError:
                return True  # a pattern that needs that long on this line is about it anyway
        return False


class _Budget:
    def __init__(self) -> None:
        self.bytes_left = READ_BUDGET_BYTES
        self.deadline = time.monotonic() + TIME_BUDGET_S

    def spent(self) -> bool:
        return self.bytes_left <= 0 or time.monotonic() > self.deadline

    def spend(self, size: int) -> None:
        self.bytes_left -= size


def candidate_lines(
    paths: Sequence[str], recognised: RecognisedLines, *, limits: ReadLimits | None = None
) -> list[CandidateLine]:
    """Distinct unrecognised error-like lines of `paths`, most frequent first. Paths that cannot be
    read again (stdin) are skipped."""
    readable = [p for p in paths if p != "-"]
    if not readable:
        return []
    budget = _Budget()
    found: dict[str, CandidateLine] = {}
    for index, source in enumerate(iter_sources(readable, limits or ReadLimits())):
        if index >= MAX_SOURCES or budget.spent():
            break
        if source.kind != "text":
            continue
        for raw_line in _lines(source, budget):
            line = parse_line(raw_line, source, 0)
            if not ERROR_LIKE.search(line.text):
                continue
            # Credentials echoed into a log stop here: what is mined, stored and posted is cleaned.
            text = clean(line.text).strip()
            earlier = found.get(text)
            if earlier is not None:
                found[text] = CandidateLine(earlier.text, earlier.raw, earlier.source, earlier.count + 1)
            elif text and len(found) < MAX_DISTINCT_LINES and not recognised(line.text, line.raw):
                found[text] = CandidateLine(text, clean(line.raw).strip(), source.name)
    return sorted(found.values(), key=lambda c: (-c.count, c.text))


def _lines(source: Source, budget: _Budget) -> Iterator[bytes]:
    """The whole lines of the source's head and tail (one run when they touch)."""
    with source.opener() as stream:
        head = stream.read(HEAD_BYTES)
        budget.spend(len(head))
        plain = _plain_file(source.name, head)
        if plain is not None:
            tail, gap = _seek_tail(plain, len(head))
            budget.spend(len(tail))
        else:
            tail, gap = _stream_tail(stream, budget)
    if not gap:
        yield from _split(head + tail, drop_first=False)
        return
    yield from _split(head, drop_first=False, drop_last=True)
    yield from _split(tail, drop_first=True)


def _plain_file(name: str, head: bytes) -> Path | None:
    """The file on disk behind a source, when the source is that file's bytes as they are (not an
    archive member, not decompressed or transcoded): its tail can then be read by seeking."""
    path = Path(name)
    try:
        if not head or not path.is_file():
            return None
        with path.open("rb") as file:
            return path if file.read(len(head)) == head else None
    except OSError:
        return None


def _seek_tail(path: Path, head_size: int) -> tuple[bytes, bool]:
    """The last TAIL_BYTES after the head, and whether bytes were skipped between them."""
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        start = max(head_size, size - TAIL_BYTES)
        file.seek(start)
        return file.read(TAIL_BYTES), start > head_size


def _stream_tail(stream: BinaryIO, budget: _Budget) -> tuple[bytes, bool]:
    """A stream cannot seek: the last TAIL_BYTES read before the budget ran out, and whether bytes were
    skipped since the head."""
    tail = bytearray()
    skipped = False
    while not budget.spent():
        chunk = stream.read(CHUNK_BYTES)
        if not chunk:
            break
        budget.spend(len(chunk))
        tail += chunk
        if len(tail) > 2 * TAIL_BYTES:
            del tail[:-TAIL_BYTES]
            skipped = True
    if len(tail) > TAIL_BYTES:
        del tail[:-TAIL_BYTES]
        skipped = True
    return bytes(tail), skipped


def _split(data: bytes, *, drop_first: bool, drop_last: bool = False) -> Iterator[bytes]:
    """The lines of `data` that hold one of the KEYWORDS; a cut first or last line is dropped."""
    start, end = 0, len(data)
    if drop_first:
        start = data.find(b"\n") + 1
        if start == 0:
            return
    if drop_last:
        end = data.rfind(b"\n", start)
        if end < 0:
            return
    lowered = data.lower()
    line_starts: set[int] = set()
    for keyword in KEYWORDS:
        at = lowered.find(keyword, start, end)
        while at >= 0:
            line_starts.add(lowered.rfind(b"\n", start, at) + 1 or start)
            line_end = lowered.find(b"\n", at, end)
            at = -1 if line_end < 0 else lowered.find(keyword, line_end + 1, end)
    for line_start in sorted(line_starts):
        line_end = data.find(b"\n", line_start, end)
        line = data[line_start : end if line_end < 0 else line_end]
        line = _ANSI.sub(b"", line.replace(b"\x00", b"")).rstrip(b"\r")
        if line:
            yield line[:MAX_LINE_BYTES]
