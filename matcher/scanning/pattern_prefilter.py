"""Signature regexes as Hyperscan prefilter patterns: "can this line match?" answered at C speed.

A keyword says little on NCCL_DEBUG=INFO logs: `Bootstrap : Using`, `NVLS`, `MNNVL`, `NET/Plugin` occur in
every process's setup lines, and each such line used to cost a prefix parse and a regex run in Python to
learn that it is the healthy case. Hyperscan can instead run the signature's own regex over the whole
block, compiled in prefilter mode (`HS_FLAG_PREFILTER`: constructs it cannot run exactly, such as
lookarounds, atomic groups and possessive quantifiers, are relaxed so that it matches a superset).

The scanner runs its regexes on a line's text with the launcher prefixes peeled off, which is a substring
of the physical line; so that a pattern matching the text also matches the physical line, every assertion
tied to where the text starts or ends (`^`, `$`, `\\b`, `\\B`, `\\A`, `\\Z`, `\\z`, `\\G`) is dropped
(dropping an assertion only widens a pattern) and named groups become plain groups (Hyperscan reports no
groups, and a signature may reuse a name across alternatives). Superset holds for ASCII lines: the
`regex` module runs on decoded text with Unicode classes and case folding, Hyperscan on bytes, so lines
holding other bytes fall back to keywords (`matcher.scanning.prefilter`). A pattern that still does not
compile keeps its keywords.

Compiling the ~190 patterns takes about a second, so the serialized database is kept in the start-up
cache (`matcher.scanning.catalog_cache`), keyed by the patterns and the Hyperscan version.
"""

from __future__ import annotations

import base64
import functools
import logging
from collections.abc import Sequence
from typing import Any

from matcher.scanning import catalog_cache

hyperscan: Any
try:
    import hyperscan
except ImportError:  # pragma: no cover - exercised on platforms without a wheel
    hyperscan = None

log = logging.getLogger("ncclbot.prefilter")

_ASSERTIONS = frozenset("bBAZzG")


def hyperscan_pattern(source: str) -> bytes | None:
    """`source` widened for Hyperscan's prefilter mode (see the module note); None when it cannot be."""
    if not source.isascii() or "(?P=" in source or "(?#" in source:
        return None  # non-ASCII literals and back-references by name: keep the keywords
    out: list[str] = []
    index, length, in_class = 0, len(source), False
    while index < length:
        char = source[index]
        if char == "\\":
            escaped = source[index + 1 : index + 2]
            if not in_class and escaped in _ASSERTIONS:
                index += 2
                continue
            if escaped in ("p", "P", "N", "X") or (escaped.isdigit() and escaped != "0"):
                return None  # Unicode properties, named characters, numbered back-references
            out.append(source[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
            out.append(char)
            index += 1
            continue
        if char == "[":
            in_class = True
            out.append(char)
            index += 1
            # A `^` right after `[` negates; a `]` first in a class is a literal.
            if source[index : index + 1] == "^":
                out.append("^")
                index += 1
            if source[index : index + 1] == "]":
                out.append("]")
                index += 1
            continue
        if char in "^$":
            index += 1
            continue
        if source.startswith("(?P<", index) or (
            source.startswith("(?<", index) and source[index + 3 : index + 4] not in ("=", "!")
        ):
            close = source.find(">", index)
            if close < 0:
                return None
            out.append("(?:")
            index = close + 1
            continue
        out.append(char)
        index += 1
    return "".join(out).encode()


@functools.lru_cache(maxsize=16)
def compiled(expressions: tuple[tuple[bytes, int], ...], role: str = "rare") -> tuple[Any, tuple[int, ...]]:
    """One block-mode database of (pattern, flags) pairs, and the indices of those that did not compile
    (left out). Kept per process and, serialized, in the start-up cache (one entry name per `role`, so
    that the databases of one catalog do not evict each other there)."""
    parts = [pattern + b"\0" + str(flags).encode() for pattern, flags in expressions]
    key = catalog_cache.digest([hyperscan.__version__.encode(), *parts])
    directory = catalog_cache.cache_directory()
    stored = catalog_cache.cached(f"prefilter-{role}", key, lambda: _build(expressions), directory)
    try:
        database = hyperscan.loadb(base64.b64decode(stored["database"]), hyperscan.HS_MODE_BLOCK)
    except Exception:  # another machine's CPU features, a damaged entry: compile here
        stored = _build(expressions)
        database = hyperscan.loadb(base64.b64decode(stored["database"]), hyperscan.HS_MODE_BLOCK)
    return database, tuple(stored["rejected"])


def _build(expressions: Sequence[tuple[bytes, int]]) -> dict[str, Any]:
    everything = list(range(len(expressions)))
    try:
        database, rejected = _database(expressions, everything), []
    except hyperscan.error:
        rejected = _rejected(everything, expressions)
        for index in rejected:
            log.debug("signature pattern %d kept to its keywords: Hyperscan cannot compile it", index)
        kept = [i for i in everything if i not in set(rejected)]
        database = _database([expressions[i] for i in kept], kept)
    return {"database": base64.b64encode(hyperscan.dumpb(database)).decode(), "rejected": rejected}


def _database(expressions: Sequence[tuple[bytes, int]], ids: Sequence[int]) -> Any:
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(
        expressions=[pattern for pattern, _ in expressions],
        ids=list(ids),
        elements=len(expressions),
        flags=[flags for _, flags in expressions],
    )
    return database


def _rejected(indices: list[int], expressions: Sequence[tuple[bytes, int]]) -> list[int]:
    """Indices whose pattern does not compile, found by halving (Hyperscan does not say which failed;
    compiling a set fails fast, at parse time, when one of it is bad)."""
    if not indices:
        return []
    try:
        _database([expressions[i] for i in indices], indices)
        return []
    except hyperscan.error:
        if len(indices) == 1:
            return indices
    middle = len(indices) // 2
    return _rejected(indices[:middle], expressions) + _rejected(indices[middle:], expressions)
