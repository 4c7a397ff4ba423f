"""Second chance for pasted excerpts: a message that a hard wrap cut across lines.

Logs pasted into issues and chats arrive wrapped at terminal or editor width
(`... Watchdog caught collective operation` / `timeout: WorkNCCL(SeqNum=...`), so the literal keyword
the prefilter looks for exists in neither line. For small sources only (pasted excerpts, not machine
logs), every line junction is re-tested with the two lines glued, with and without the space a wrap
may have eaten; a keyword that appears only across the junction makes the glued pair a candidate
(`junctions`).

A keyword may also survive the wrap while the words the pattern needs went to the next line(s), and a
terminal wraps a long line several times (`fold -w 80`). `wrapped_runs` finds the runs of lines that may
be one wrapped message: a line of at least MIN_WRAP_BYTES followed by lines that do not start a log record
of their own (no NCCL header, rank tag, timestamp, glog or syslog head), at most MAX_CONTINUATIONS of
them. The scanner tries the root and cascade signatures a glued run is a candidate for (and its lines
were not found by) on the glued lines, and keeps a match only where it runs across a junction: text a
line alone does not hold, never a lookahead that merely peeks at the next line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from matcher.scanning.prefilter import Prefilter

# Pasted excerpts are small; machine-written logs are not wrapped and are too large for this pass.
MAX_SOURCE_BYTES = 1024 * 1024
# Bytes kept on each side of a junction: longer than any keyword.
_CONTEXT = 96
_SEPARATORS = (b"", b" ")
SEPARATORS = _SEPARATORS
# A wrapped line is long: the head of a run is at least this long (terminal and editor widths are 80+).
MIN_WRAP_BYTES = 50
MAX_CONTINUATIONS = 5
# An editor wraps before a word that does not fit: a shorter head is a wrap where it and the next line's
# first word together pass the narrowest width a paste is wrapped at.
MIN_WIDTH = 72
# Lines that start a log record of their own are never a wrap's continuation.
_RECORD_START = re.compile(
    rb"\s*(?:[\w.-]{1,63}:\d{1,10}:\d{1,10} \[\d{1,3}\]|\[(?:rank|default)\d{1,6}\]|\d{4}-\d\d-\d\d[T ]\d\d:"
    rb"|\[?[IWEF]\d{4} \d\d:|\[\d{4}-\d\d-\d\d|[A-Z][a-z]{2} [ \d]\d \d\d:|\[ {0,12}\d{1,12}\.\d{1,9}\]"
    rb"|\d{1,6}: |\[\d{1,6},\d{1,6}\]<|\(\w[\w.:-]{0,80} pid=|Traceback |```)"
)


@dataclass(frozen=True, slots=True)
class Junction:
    """Lines `index` and `index + 1` (0-based within the block) glued with `separator` newly match
    `signatures` (catalog indices that neither line was a candidate for alone)."""

    index: int
    separator: bytes
    signatures: tuple[int, ...]


def junctions(lines: list[bytes], prefilter: Prefilter, known: Mapping[int, set[int]]) -> list[Junction]:
    """Junctions whose glued text holds a keyword that neither line holds (`known`: line index ->
    signatures it was already a candidate for)."""
    snippets: list[bytes] = []
    where: list[tuple[int, bytes]] = []
    for index in range(len(lines) - 1):
        head, tail = lines[index], lines[index + 1]
        if not head.strip() or not tail.strip():
            continue
        for separator in _SEPARATORS:
            if separator and (head.endswith(b" ") or tail.startswith(b" ")):
                continue
            snippets.append(head[-_CONTEXT:] + separator + tail[:_CONTEXT])
            where.append((index, separator))
    if not snippets:
        return []
    buffer = b"\n".join(snippets)
    starts = [0]
    for snippet in snippets[:-1]:
        starts.append(starts[-1] + len(snippet) + 1)
    found: list[Junction] = []
    seen: set[tuple[int, int]] = set()
    position = 0
    for candidate in prefilter.lines(buffer):
        while position + 1 < len(starts) and starts[position + 1] <= candidate.start:
            position += 1
        index, separator = where[position]
        fresh = set(candidate.signatures) - known.get(index, set()) - known.get(index + 1, set())
        fresh = {s for s in fresh if (index, s) not in seen}
        if fresh:
            seen.update((index, s) for s in fresh)
            found.append(Junction(index, separator, tuple(sorted(fresh))))
    return found


def wrapped_runs(lines: list[bytes]) -> list[tuple[int, int]]:
    """Runs (first, last line index, inclusive, last > first) of lines that may be one wrapped message
    (see the module note); `lines` without their newlines, a `\r` of CRLF ends included."""
    runs: list[tuple[int, int]] = []
    index, count = 0, len(lines)
    while index < count - 1:
        last = index
        while (
            last < count - 1
            and last - index < MAX_CONTINUATIONS
            and _may_wrap(lines[last].rstrip(b"\r"), lines[last + 1])
            and _RECORD_START.match(lines[last + 1]) is None
        ):
            last += 1
        if last > index:
            runs.append((index, last))
            index = last + 1
        else:
            index += 1
    return runs


def _may_wrap(head: bytes, following: bytes) -> bool:
    if not following.strip():
        return False
    if len(head) >= MIN_WRAP_BYTES:
        return True
    word = following.split(None, 1)[0]
    return len(head) + 1 + len(word) > MIN_WIDTH
