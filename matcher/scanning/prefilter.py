"""Multi-literal prefilter: one pass over a block of log bytes -> the lines worth running regexes on.

Every signature declares literal keywords; a line is a candidate for a signature only when it contains one
of them. All keywords of the catalog go into one Hyperscan database (literal mode, block scan), which
reports every keyword occurrence in a multi-megabyte block at memory speed; the scanner then runs only the
few candidate signatures' regexes on the few candidate lines. Where Hyperscan is not installable, a
pure-Python fallback finds candidate lines with `bytes.find` per keyword and re-checks the keywords of
each such line. Measured on a 20 MB NCCL_DEBUG=INFO log with the full catalog (~370 keywords): Hyperscan
~1.3 GB/s; `bytes.find` per keyword ~7 MB/s (one C-speed pass per keyword); one `re` (or `regex`)
alternation of all keywords ~1 MB/s. The fallback is fine for pasted excerpts and slow on huge logs.

`lines(block)` answers at keyword level (every signature whose keyword a line holds). The scanner asks
`candidates(block)`, which with Hyperscan is stricter for root and cascade signatures: their own regexes,
compiled for Hyperscan as supersets (`matcher.scanning.pattern_prefilter`), must be able to match the
line, so the healthy setup lines that merely hold a keyword never reach Python. Context signatures stay
at keyword level (their floods are handled by `matcher.scanning.flood`); with `sample_context`, only
each context keyword's first occurrence in the block counts, and one Hyperscan pass answers both.
"""

from __future__ import annotations

import bisect
import functools
import re
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from matcher.scanning import pattern_prefilter
from matcher.scanning.catalog import Catalog

hyperscan: Any
try:
    import hyperscan
except ImportError:  # pragma: no cover - exercised on platforms without a wheel
    hyperscan = None


class Candidate(NamedTuple):
    """A line of the block (`data[start:end]`, no newline) and the catalog indices it may match, in
    increasing order (a tuple: thousands are made per block of setup lines)."""

    start: int
    end: int
    signatures: tuple[int, ...]


class _Backend(Protocol):
    def lines(self, data: bytes) -> list[Candidate]: ...

    def candidates(
        self, data: bytes, sample_context: bool, begin: int, end: int, ascii: bool
    ) -> list[Candidate]: ...


@dataclass(frozen=True, slots=True)
class _Keyword:
    text: bytes  # lower-cased when caseless
    caseless: bool
    signatures: tuple[int, ...]


def _keywords(catalog: Catalog) -> list[_Keyword]:
    """De-duplicated keywords, each pointing at every signature that declares it (tail signatures are
    read from each source's end, never looked for by the scan: see catalog.READS)."""
    owners: dict[tuple[bytes, bool], list[int]] = defaultdict(list)
    for index, signature in enumerate(catalog.signatures):
        if signature.read != "scan":
            continue
        for keyword in signature.keywords:
            text = keyword.encode()
            key = (text.lower(), True) if signature.caseless else (text, False)
            if index not in owners[key]:
                owners[key].append(index)
    return [_Keyword(text, caseless, tuple(sigs)) for (text, caseless), sigs in owners.items()]


_NON_ASCII = re.compile(rb"[\x80-\xff]")
_SCRATCH = threading.local()


def scratch_for(database: Any) -> Any:
    """This thread's Hyperscan scratch space for `database`. A scratch serves one scan at a time
    (another thread's scan meanwhile fails with ScratchInUseError), and a server diagnoses several
    uploads at once over one cached catalog, so each thread gets its own, made on first use."""
    spaces: dict[int, tuple[Any, Any]] = _SCRATCH.__dict__.setdefault("spaces", {})
    held = spaces.get(id(database))
    if held is None or held[0] is not database:
        held = (database, hyperscan.Scratch(database))
        spaces[id(database)] = held
    return held[1]


def _line_bounds(data: bytes, start: int, end: int) -> tuple[int, int]:
    """Bounds of the line holding data[start:end] (keywords never contain a newline)."""
    line_start = data.rfind(b"\n", 0, start) + 1
    line_end = data.find(b"\n", end)
    return line_start, len(data) if line_end < 0 else line_end


class _HyperscanBackend:
    def __init__(self, catalog: Catalog, keywords: list[_Keyword]) -> None:
        self._catalog = catalog
        self._keywords = keywords

    @functools.cached_property
    def _database(self) -> Any:
        """Every keyword (wrap re-joining, non-ASCII lines): built on first use, many runs never need it."""
        return _literal_database(self._keywords, role="keywords")

    def lines(self, data: bytes) -> list[Candidate]:
        hits: list[tuple[int, tuple[int, ...]]] = []

        def on_match(keyword: int, start: int, end: int, flags: int, context: Any) -> None:
            hits.append((end, self._keywords[keyword].signatures))

        self._database.scan(data, match_event_handler=on_match, scratch=scratch_for(self._database))
        return _group(data, hits)

    def candidates(
        self, data: bytes, sample_context: bool, begin: int, end: int, ascii: bool
    ) -> list[Candidate]:
        screen = self._screen
        hits: list[tuple[int, tuple[int, ...]]] = []
        owners, context_owners = screen.screen_owners, screen.context_owners

        def on_screen(expression: int, start: int, stop: int, flags: int, context: Any) -> None:
            hits.append((begin + stop, owners[expression]))

        def on_context(keyword: int, start: int, stop: int, flags: int, context: Any) -> None:
            hits.append((begin + stop, context_owners[keyword]))

        # The region is scanned in place (a block is a MiB; a copy of the rest of it per region would
        # cost as much as the scan).
        region = memoryview(data)[begin:end] if begin or end < len(data) else data
        if screen.screen is not None:
            screen.screen.scan(region, match_event_handler=on_screen, scratch=scratch_for(screen.screen))
        if not sample_context and screen.context_full is not None:
            screen.context_full.scan(
                region, match_event_handler=on_context, scratch=scratch_for(screen.context_full)
            )
        if not ascii:
            part = bytes(region)
            if not part.isascii():
                hits.extend((begin + at, sigs) for at, sigs in self._keyword_hits_off_ascii(part))
        if len(hits) > 1:
            hits.sort(key=_first)
        return _group(data, hits, begin)

    def _keyword_hits_off_ascii(self, data: bytes) -> list[tuple[int, tuple[int, ...]]]:
        """Keyword hits of the regex-screened signatures on lines holding non-ASCII bytes, where the
        Hyperscan form of a pattern is no superset of the `regex` one (Unicode classes, case folding)."""
        screened = self._screen.screened_owners
        spans: list[tuple[int, int]] = []
        position = 0
        while (found := _NON_ASCII.search(data, position)) is not None:
            spans.append(_line_bounds(data, found.start(), found.end()))
            position = spans[-1][1] + 1
        hits: list[tuple[int, tuple[int, ...]]] = []
        starts = [start for start, _ in spans]

        def on_match(keyword: int, start: int, end: int, flags: int, context: Any) -> None:
            owners = screened[keyword]
            if owners:
                at = bisect.bisect_right(starts, end - 1) - 1
                if at >= 0 and end <= spans[at][1]:
                    hits.append((end, owners))

        self._database.scan(data, match_event_handler=on_match, scratch=scratch_for(self._database))
        return hits

    @functools.cached_property
    def _screen(self) -> _Screen:
        return _Screen(self._catalog, self._keywords)


class _Screen:
    """The scanner's databases. `screen` holds root and cascade signatures as regexes where Hyperscan can
    run them (`matcher.scanning.pattern_prefilter`), else their keywords, and the first occurrence of each
    context keyword in a block: what a scan needs once a flood of setup lines keeps saying what is already
    known, in one pass. `context_full` reports every occurrence of the context keywords, for the lines
    before that (where its hits join the first occurrences `screen` also reports)."""

    def __init__(self, catalog: Catalog, keywords: list[_Keyword]) -> None:
        signatures = self._signatures = catalog.signatures
        converted: dict[int, bytes] = {}
        for index, signature in enumerate(signatures):
            if signature.role != "context" and not signature.after:
                pattern = pattern_prefilter.hyperscan_pattern(signature.pattern_source)
                if pattern is not None:
                    converted[index] = pattern
        context = [
            _Keyword(k.text, k.caseless, tuple(s for s in k.signatures if signatures[s].role == "context"))
            for k in keywords
        ]
        context = [k for k in context if k.signatures]
        self.context_owners = [k.signatures for k in context]
        first_context = [
            (
                re.escape(k.text),
                hyperscan.HS_FLAG_SINGLEMATCH | (hyperscan.HS_FLAG_CASELESS if k.caseless else 0),
            )
            for k in context
        ]
        screened = set(converted)
        expressions, owners = self._expressions(converted, keywords, screened, first_context)
        database, rejected = pattern_prefilter.compiled(tuple(expressions)) if expressions else (None, ())
        if rejected:  # patterns Hyperscan could not take: their signatures keep their keywords
            screened -= {owners[i][0] for i in rejected if i < len(converted)}
            expressions, owners = self._expressions(converted, keywords, screened, first_context)
            database, rejected = pattern_prefilter.compiled(tuple(expressions))
            if any(i >= len(converted) for i in rejected):
                raise RuntimeError("a signature keyword does not compile in Hyperscan")
        self.screen = database  # None: nothing to look for
        self.screen_owners = owners
        self.context_full = _literal_database(context, "context") if context else None
        self.screened_owners = [tuple(s for s in k.signatures if s in screened) for k in keywords]

    def _expressions(
        self,
        converted: dict[int, bytes],
        keywords: list[_Keyword],
        screened: set[int],
        first_context: list[tuple[bytes, int]],
    ) -> tuple[list[tuple[bytes, int]], list[tuple[int, ...]]]:
        """The screening database's expressions (regexes first, a rejected one never compiled again) and
        the signatures each one stands for."""
        expressions: list[tuple[bytes, int]] = []
        owners: list[tuple[int, ...]] = []
        for index, pattern in converted.items():
            if index in screened:
                caseless = hyperscan.HS_FLAG_CASELESS if self._signatures[index].caseless else 0
                expressions.append((pattern, hyperscan.HS_FLAG_PREFILTER | caseless))
                owners.append((index,))
        self._add_keywords(keywords, screened, expressions, owners)
        expressions += first_context
        owners += self.context_owners
        return expressions, owners

    def _add_keywords(
        self,
        keywords: list[_Keyword],
        screened: set[int],
        expressions: list[tuple[bytes, int]],
        owners: list[tuple[int, ...]],
    ) -> None:
        """The keywords of root and cascade signatures whose regex is not screened by Hyperscan."""
        signatures = self._signatures
        for keyword in keywords:
            unscreened = tuple(
                s for s in keyword.signatures if signatures[s].role != "context" and s not in screened
            )
            if unscreened:
                flags = hyperscan.HS_FLAG_CASELESS if keyword.caseless else 0
                expressions.append((re.escape(keyword.text), flags))
                owners.append(unscreened)


def _literal_database(keywords: list[_Keyword], role: str, first_only: bool = False) -> Any:
    """The keywords as one database (escaped into patterns, so that it is cached like the others)."""
    first = hyperscan.HS_FLAG_SINGLEMATCH if first_only else 0
    expressions = tuple(
        (re.escape(k.text), (hyperscan.HS_FLAG_CASELESS if k.caseless else 0) | first) for k in keywords
    )
    database, rejected = pattern_prefilter.compiled(expressions, role)
    if rejected:  # cannot happen for escaped literals
        raise RuntimeError("a signature keyword does not compile in Hyperscan")
    return database


def _first(hit: tuple[int, tuple[int, ...]]) -> int:
    return hit[0]


def _group(data: bytes, hits: list[tuple[int, tuple[int, ...]]], begin: int = 0) -> list[Candidate]:
    """Hits (end offset, signatures) in order of end offset -> one candidate per line holding any
    (`begin`: where the scanned region of `data` starts). Each hit's signatures are in increasing order
    already (see `_keywords`), so a line of one hit keeps them as they are."""
    candidates: list[Candidate] = []
    line_start = line_end = -1
    first: tuple[int, ...] = ()  # the line's first hit's signatures
    more: set[int] | None = None  # all of them, once a second hit adds others
    size = len(data)
    for end, signatures in hits:
        if end > line_end:
            # A regex hit may end on the newline it matched (`\s`): it belongs to the line before.
            at = end - 2 if end - begin >= 2 and data[end - 1] == 10 else end - 1
            if at > line_end:
                if first:
                    candidates.append(
                        Candidate(line_start, line_end, first if more is None else tuple(sorted(more)))
                    )
                line_start = data.rfind(b"\n", 0, at) + 1
                line_end = data.find(b"\n", at + 1)
                if line_end < 0:
                    line_end = size
                first, more = signatures, None
                continue
        if signatures != first:
            if more is None:
                more = set(first)
            more.update(signatures)
    if first:
        candidates.append(Candidate(line_start, line_end, first if more is None else tuple(sorted(more))))
    return candidates


class _FindBackend:
    def __init__(self, keywords: list[_Keyword]) -> None:
        self._keywords = keywords
        self._any_caseless = any(k.caseless for k in keywords)

    def lines(self, data: bytes) -> list[Candidate]:
        folded = data.lower() if self._any_caseless else data
        starts: dict[int, int] = {}
        for keyword in self._keywords:
            haystack = folded if keyword.caseless else data
            position = haystack.find(keyword.text)
            while position >= 0:
                line_start, line_end = _line_bounds(data, position, position + len(keyword.text))
                starts[line_start] = line_end
                # One hit per line is enough to make it a candidate; the line is re-checked below.
                position = haystack.find(keyword.text, line_end)
        candidates: list[Candidate] = []
        for line_start in sorted(starts):
            line_end = starts[line_start]
            line = data[line_start:line_end]
            folded_line = line.lower() if self._any_caseless else line
            found: set[int] = set()
            for keyword in self._keywords:
                if keyword.text in (folded_line if keyword.caseless else line):
                    found.update(keyword.signatures)
            candidates.append(Candidate(line_start, line_end, tuple(sorted(found))))
        return candidates

    def candidates(
        self, data: bytes, sample_context: bool, begin: int, end: int, ascii: bool
    ) -> list[Candidate]:
        if not begin and end >= len(data):
            return self.lines(data)
        return [Candidate(begin + c.start, begin + c.end, c.signatures) for c in self.lines(data[begin:end])]


class Prefilter:
    """Compiled keyword set of a catalog; `lines(block)` lists the lines holding a keyword in block order,
    `candidates(block)` the scanner's candidate lines (see `_Screen`)."""

    def __init__(self, catalog: Catalog, *, use_hyperscan: bool | None = None) -> None:
        keywords = _keywords(catalog)
        want_hyperscan = hyperscan is not None if use_hyperscan is None else use_hyperscan
        if want_hyperscan and hyperscan is None:
            raise RuntimeError("hyperscan is not installed")
        self.backend = "hyperscan" if want_hyperscan else "find"
        self._backend: _Backend = (
            _HyperscanBackend(catalog, keywords) if want_hyperscan else _FindBackend(keywords)
        )

    def lines(self, data: bytes) -> list[Candidate]:
        """Every line holding a keyword, with every signature whose keyword it holds."""
        return self._backend.lines(data)

    def candidates(
        self,
        data: bytes,
        *,
        sample_context: bool = False,
        begin: int = 0,
        end: int | None = None,
        ascii: bool = False,
    ) -> list[Candidate]:
        """The lines worth a regex run: keyword lines, where (with Hyperscan) a root or cascade signature
        also needs its regex to be able to match the line. With `sample_context`, context keywords count
        only at their first occurrence in the region. `begin`/`end`: the region of `data` to look at
        (whole lines; offsets stay those of `data`); `ascii`: the caller knows `data` is all ASCII."""
        stop = len(data) if end is None else end
        return self._backend.candidates(data, sample_context, begin, stop, ascii)


# Compiled prefilters of the last few catalogs used (compiling one costs ~100 ms); bounded so a process
# that loads catalogs repeatedly does not keep them all.
_PREFILTER_CACHE = 4
_prefilters: list[tuple[Catalog, Prefilter]] = []


def prefilter_for(catalog: Catalog) -> Prefilter:
    """The compiled prefilter of a catalog object, built once while it stays among the recent ones."""
    for known, prefilter in _prefilters:
        if known is catalog:
            return prefilter
    prefilter = Prefilter(catalog)
    _prefilters.append((catalog, prefilter))
    del _prefilters[:-_PREFILTER_CACHE]
    return prefilter
