"""Second chance for pasted excerpts: keywords that a hard wrap split across two lines.

Logs pasted into issues and chats arrive wrapped at terminal or editor width
(`... Watchdog caught collective operation` / `timeout: WorkNCCL(SeqNum=...`), so the literal keyword
the prefilter looks for exists in neither line. For small sources only (pasted excerpts, not machine
logs), every line junction is re-tested with the two lines glued, with and without the space a wrap
may have eaten; a keyword that appears only across the junction makes the glued pair a candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from matcher.scanning.prefilter import Prefilter

# Pasted excerpts are small; machine-written logs are not wrapped and are too large for this pass.
MAX_SOURCE_BYTES = 1024 * 1024
# Bytes kept on each side of a junction: longer than any keyword.
_CONTEXT = 96
_SEPARATORS = (b"", b" ")


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
