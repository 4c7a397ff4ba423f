"""Scanner: blocks -> candidate lines (multi-literal prefilter) -> signature regexes -> observations.

Interface: `scan(sources, catalog, limits, progress=None) -> ScanResult`.

Per block of whole lines the prefilter names the few candidate lines and, per line, the signatures whose
keywords it holds; only those lines are numbered (a running newline count), split into attributed
fragments once (`prefixes.parse_segments`), and only those signatures' regexes run, each with a timeout so
no line can hang the scan. A pattern is tried on each fragment's peeled text, then its raw form, then the
whole physical line (progress-bar noise the reader sets aside can carry a clue). `after = N` signatures
see the next N lines (carried over a block boundary); small pasted sources also get a second chance for
keywords split by a hard wrap (`matcher.scanning.rejoin`). Memory stays bounded: a block at a time, and a
cap on observations per signature, source and writer (a 400 MB log repeating one line yields a handful of
observations, not millions). Flight Recorder sources are skipped: the pipeline reads them."""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from matcher.model import FieldValue, Line, Observation, ScanResult, SourceSummary, Stats
from matcher.reading import prefixes, read
from matcher.reading.read import ReadLimits, Source
from matcher.scanning import rejoin
from matcher.scanning.catalog import Catalog, Signature, convert_fields
from matcher.scanning.flood import FloodControl, Turn
from matcher.scanning.prefetch import prefetched
from matcher.scanning.prefilter import Prefilter

# Seconds one regex may spend on one line; a pathological line then simply does not match.
REGEX_TIMEOUT_S = 0.05
# Observations kept per (signature, source, writer) and per (signature, source): enough for every rank of
# a large job to report its timeout and its NCCL init lines, few enough that a repeated line cannot grow
# memory with log size. A writer is what tells processes apart on a line: rank, host, pid, and the rank
# the line itself names (NCCL init lines of an interleaved file carry no rank prefix).
MAX_PER_WRITER = 8
MAX_PER_SOURCE = 16384
MAX_MATCHES_PER_LINE = 32
# NCCL_DEBUG=INFO floods a log with setup lines (channels, connections: thousands per process). Per
# context signature and writer only MAX_PER_WRITER observations are kept, so once the same line head
# (the first three tokens: NCCL's `host:pid:tid [dev] NCCL`) has offered a context signature this many
# candidate lines in one source, the rest are skipped before the costly prefix parse. Root and cascade
# signatures are never skipped, and heads that differ per line (timestamps) never reach the limit.
CONTEXT_LINES_PER_HEAD = 256
# Until a flood of context lines is noticed (`matcher.scanning.flood`), a block is scanned in slices of
# this size, so that the cheaper sampling scan takes over after a few lines rather than a whole block.
SLICE_BYTES = 64 * 1024
# Bytes at each end of a source that its content digest covers (see SourceSummary.content_digest).
DIGEST_EDGE_BYTES = 64 * 1024

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


@dataclass(slots=True)
class TimeoutBudget:
    """Regex timeouts allowed per signature in one source. A line that makes a pattern time out costs
    REGEX_TIMEOUT_S; a hostile log repeating such a line could still add up to hours, so a signature
    that keeps timing out is given up for the rest of the source."""

    limit: int = 20
    spent: Counter[str] = field(default_factory=Counter)

    def allows(self, signature: Signature) -> bool:
        return self.spent[signature.id] < self.limit


def match_all(signature: Signature, text: str, budget: TimeoutBudget) -> list[dict[str, FieldValue]]:
    """Fields of every distinct match in text (a pasted line may join several messages); empty when
    nothing matches or the regex runs out of time."""
    found: list[dict[str, FieldValue]] = []
    if not budget.allows(signature):
        return found
    try:
        for match in signature.pattern.finditer(text, timeout=REGEX_TIMEOUT_S):
            fields = convert_fields(match.groupdict())
            if fields not in found:
                found.append(fields)
            if len(found) >= MAX_MATCHES_PER_LINE:
                break
    except TimeoutError:
        budget.spent[signature.id] += 1
    return found


@dataclass(slots=True)
class _Record:
    """One candidate physical line: its attributed fragments (usually one) and its whole decoded text."""

    segments: tuple[Line, ...]
    whole: str

    @classmethod
    def parse(cls, raw: bytes, source: Source, lineno: int) -> _Record:
        segments = prefixes.parse_segments(raw, source, lineno)
        return cls(segments, raw.decode("utf-8", errors="replace").rstrip("\r"))


@dataclass(slots=True)
class _Pending:
    """A multi-line record (`after = N`) whose continuation lines lie in the next block."""

    signature: Signature
    record: _Record
    lines: list[str]
    missing: int


@dataclass(slots=True)
class _SourceScan:
    """Running state of one source while its blocks go by."""

    source: Source
    catalog: Catalog
    observations: list[Observation]
    kept: Counter[tuple[object, ...]] = field(default_factory=Counter)
    kept_total: Counter[str] = field(default_factory=Counter)
    lines: int = 0
    size: int = 0
    first_time: float | None = None
    last_time: float | None = None
    ranks: set[int] = field(default_factory=set)
    pending: list[_Pending] = field(default_factory=list)
    last: read.Block | None = None
    budget: TimeoutBudget = field(default_factory=TimeoutBudget)
    offered: Counter[tuple[int, bytes]] = field(default_factory=Counter)
    head: bytes | None = None
    flood: FloodControl = field(init=False)
    small: list[read.Block] | None = field(default_factory=list)  # the blocks while the source is small

    def __post_init__(self) -> None:
        context = (i for i, s in enumerate(self.catalog.signatures) if s.role == "context")
        self.flood = FloodControl(frozenset(context))

    def block(self, block: read.Block, prefilter: Prefilter) -> None:
        data = block.data
        if self.head is None:
            self.head = bytes(data[:DIGEST_EDGE_BYTES])
        self.size += len(data)
        self._finish_pending(data, block.first_lineno)
        cursor = _Cursor(block.first_lineno)
        position = 0
        while position < len(data):
            # Awake, a region is a slice, so that a flood is noticed early; asleep, the rest of the block.
            end = len(data) if self.flood.sampling else _line_end(data, position + SLICE_BYTES)
            position = self._region(data, position, end, prefilter, cursor)
        # Lines of this block are known for free once the next block says where it starts; only the
        # last block of a source is counted (see `close`).
        if self.last is not None:
            self.lines += block.first_lineno - self.last.first_lineno
        self.last = block
        if self.small is not None:  # re-joined at the end, once the source is known to be small
            self.small = [*self.small, block] if self.size <= rejoin.MAX_SOURCE_BYTES else None

    def _region(
        self,
        data: bytes,
        begin: int,
        end: int,
        prefilter: Prefilter,
        cursor: _Cursor,
    ) -> int:
        """Scans data[begin:end] (whole lines); returns where the next region starts: `end`, or the line
        after the one that put context signatures to sleep or woke them up."""
        region = data[begin:end] if begin or end < len(data) else data
        flood = self.flood
        for candidate in prefilter.candidates(region, sample_context=flood.sampling):
            start, stop = begin + candidate.start, begin + candidate.end
            chosen, had_context = flood.choose(candidate.signatures)
            if chosen:
                lineno = cursor.advance(data, start)
                active = self._worth_parsing(data, start, chosen)
                looked = [i for i in active if i in flood.context]
                before = [self.kept_total[self.catalog.signatures[i].id] for i in looked]
                if active:
                    self._candidate(data, start, stop, lineno, active)
            else:
                looked, before = [], []
            if not had_context:
                continue
            productive = [
                index
                for index, count in zip(looked, before, strict=True)
                if self.kept_total[self.catalog.signatures[index].id] > count
            ]
            if flood.outcome(looked, productive) is not Turn.GO_ON:
                return stop + 1
        return end

    def _candidate(self, data: bytes, start: int, stop: int, lineno: int, active: list[int]) -> None:
        record = _Record.parse(data[start:stop], self.source, lineno)
        for segment in record.segments:
            self._note_line(segment)
        for index in active:
            signature = self.catalog.signatures[index]
            if not signature.after:
                self._try(signature, record, [])
                continue
            following = _following_lines(data, stop, signature.after)
            texts = [self._text_of(raw, lineno + 1 + i) for i, raw in enumerate(following)]
            if len(following) < signature.after:  # the record may go on in the next block
                self.pending.append(_Pending(signature, record, texts, signature.after - len(following)))
            else:
                self._try(signature, record, texts)

    def _worth_parsing(self, data: bytes, start: int, signatures: Iterable[int]) -> list[int]:
        """The candidate signatures still worth a parse of this line (see CONTEXT_LINES_PER_HEAD)."""
        signatures = list(signatures)
        if all(self.catalog.signatures[index].role != "context" for index in signatures):
            return signatures  # root and cascade lines are always parsed: no head to find
        # The head is the first three tokens: NCCL's `host:pid:tid [dev] NCCL` is the same on every line
        # of one process, while heads that start with a clock (syslog, glog) change every second.
        end = start
        for _ in range(3):
            end = data.find(b" ", end + 1, start + 160)
            if end < 0:
                break
        head = data[start:end] if end > start else b""
        active = []
        for index in signatures:
            if head and self.catalog.signatures[index].role == "context":
                key = (index, head)
                self.offered[key] += 1
                if self.offered[key] > CONTEXT_LINES_PER_HEAD:
                    continue
            active.append(index)
        return active

    def _rejoin(self, block: read.Block, prefilter: Prefilter) -> None:
        """Pasted excerpts: keywords that a hard wrap split across two lines (matcher.scanning.rejoin).
        What each line holds is taken from the keywords alone (`Prefilter.lines`), every occurrence,
        whatever the scan itself looked at."""
        data = block.data
        known: dict[int, set[int]] = {}
        cursor = _Cursor(0)
        for candidate in prefilter.lines(data):
            known[cursor.advance(data, candidate.start)] = set(candidate.signatures)
        lines = data.split(b"\n")
        for junction in rejoin.junctions(lines, prefilter, known):
            glued = lines[junction.index] + junction.separator + lines[junction.index + 1]
            record = _Record.parse(glued, self.source, block.first_lineno + junction.index)
            for index in junction.signatures:
                self._try(self.catalog.signatures[index], record, [])

    def close(self, prefilter: Prefilter) -> SourceSummary:
        for block in self.small or ():
            self._rejoin(block, prefilter)
        self.small = None
        digest = hashlib.blake2b(str(self.size).encode(), digest_size=16)
        digest.update(self.head or b"")
        if self.last is not None:
            data = self.last.data
            digest.update(data[-DIGEST_EDGE_BYTES:])
            self.lines += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
            self.last = None
        for pending in self.pending:
            self._try(pending.signature, pending.record, pending.lines)
        self.pending = []
        return SourceSummary(
            name=self.source.name,
            rank=self.source.rank,
            host=self.source.host,
            lines=self.lines,
            bytes=self.size,
            first_time=self.first_time,
            last_time=self.last_time,
            ranks_seen=tuple(sorted(self.ranks)),
            content_digest=digest.hexdigest(),
        )

    def _finish_pending(self, data: bytes, first_lineno: int) -> None:
        still: list[_Pending] = []
        for pending in self.pending:
            following = _following_lines(data, -1, pending.missing)
            pending.lines.extend(self._text_of(raw, first_lineno + i) for i, raw in enumerate(following))
            pending.missing -= len(following)
            if pending.missing > 0 and following:
                still.append(pending)
            else:
                self._try(pending.signature, pending.record, pending.lines)
        self.pending = still

    def _text_of(self, raw: bytes, lineno: int) -> str:
        return prefixes.parse_line(raw, self.source, lineno).text

    def _note_line(self, line: Line) -> None:
        if line.time is not None:
            if self.first_time is None or line.time < self.first_time:
                self.first_time = line.time
            if self.last_time is None or line.time > self.last_time:
                self.last_time = line.time
        if line.rank is not None:
            self.ranks.add(line.rank)

    def _try(self, signature: Signature, record: _Record, continuation: list[str]) -> None:
        for line, fields in _matches(signature, record, continuation, self.budget):
            self._keep(signature, line, fields)

    def _keep(self, signature: Signature, line: Line, fields: dict[str, FieldValue]) -> None:
        writer = (signature.id, line.rank, line.host, line.pid, fields.get("rank"), fields.get("pg_rank"))
        if self.kept[writer] >= MAX_PER_WRITER or self.kept_total[signature.id] >= MAX_PER_SOURCE:
            return
        self.kept[writer] += 1
        self.kept_total[signature.id] += 1
        self.observations.append(
            Observation(
                signature=signature.id,
                classes=signature.classes,
                role=signature.role,
                line=line,
                fields=fields,
                weight=signature.weight,
                symptom=signature.symptom,
            )
        )


def _matches(
    signature: Signature, record: _Record, continuation: list[str], budget: TimeoutBudget
) -> list[tuple[Line, dict[str, FieldValue]]]:
    """Where the signature matches a candidate line: each fragment's peeled text, else its unpeeled form
    (peeling can go wrong on damaged lines); when no fragment matches, the whole physical line, which
    still holds what the reader set aside as progress-bar noise (`Running tokenizer ... 88%|###`)."""

    def attempt(text: str) -> list[dict[str, FieldValue]]:
        return match_all(signature, "\n".join([text, *continuation]) if continuation else text, budget)

    found: list[tuple[Line, dict[str, FieldValue]]] = []
    wanted = len(signature.pattern.groupindex)
    for segment in record.segments:
        matches = attempt(segment.text)
        if segment.raw and segment.raw != segment.text and (not matches or len(matches[0]) < wanted):
            # Patterns may also read the prefix (a host, a pid): the raw line fills what the text lacks.
            extra = attempt(segment.raw)
            if extra and matches:
                matches[0] = {**extra[0], **matches[0]}
            elif extra:
                matches = extra
        found.extend((segment, fields) for fields in matches)
    if found or any(record.whole == segment.raw for segment in record.segments):
        return found
    last = record.segments[-1]
    whole = replace(last, text=record.whole, raw=record.whole[: prefixes.RAW_CAP])
    return [(whole, fields) for fields in attempt(record.whole)]


def match_lines(
    signature: Signature, lines: list[bytes], source: Source
) -> list[tuple[Line, dict[str, FieldValue]]]:
    """What the scanner extracts with `signature` from a candidate line (and, for `after = N`
    signatures, its continuation lines): the catalog example test runs every example through this."""
    record = _Record.parse(lines[0], source, 1)
    continuation = [prefixes.parse_line(raw, source, 2 + i).text for i, raw in enumerate(lines[1:])]
    return _matches(signature, record, continuation, TimeoutBudget())


@dataclass(slots=True)
class _Cursor:
    """Line numbers of a block's candidate lines: newlines are counted only up to each candidate line,
    continuing from the previous one."""

    first: int
    lineno: int = 0
    counted_to: int = 0

    def __post_init__(self) -> None:
        self.lineno = self.first

    def advance(self, data: bytes, start: int) -> int:
        self.lineno += data.count(b"\n", self.counted_to, start)
        self.counted_to = start
        return self.lineno


def _line_end(data: bytes, position: int) -> int:
    """Where the line holding data[position] ends, past its newline (len(data) past the end)."""
    if position >= len(data):
        return len(data)
    newline = data.find(b"\n", position)
    return len(data) if newline < 0 else newline + 1


def _following_lines(data: bytes, line_end: int, count: int) -> list[bytes]:
    """Up to `count` lines after the newline at `line_end` (-1: from the start of data)."""
    lines: list[bytes] = []
    position = line_end + 1
    while len(lines) < count and position < len(data):
        end = data.find(b"\n", position)
        if end < 0:
            end = len(data)
        lines.append(data[position:end])
        position = end + 1
    return lines


def scan(
    sources: Iterable[Source],
    catalog: Catalog,
    limits: ReadLimits | None = None,
    progress: Callable[[int], None] | None = None,
) -> ScanResult:
    started = time.monotonic()
    limits = limits or ReadLimits()
    prefilter = prefilter_for(catalog)
    observations: list[Observation] = []
    summaries: list[SourceSummary] = []
    done = 0
    for source in sources:
        if source.kind != "text":
            continue  # Flight Recorder dumps are read by the pipeline, not scanned as text.
        first = len(observations)
        state = _SourceScan(source, catalog, observations)
        for block in prefetched(read.iter_blocks(source, limits)):
            state.block(block, prefilter)
            done += len(block.data)
            if progress is not None:
                progress(done)
        summaries.append(state.close(prefilter))
        # Multi-line records and re-joined wraps finish late; keep each source's observations in file order.
        observations[first:] = sorted(observations[first:], key=lambda o: o.line.lineno)
    ranks: set[int] = set()
    for summary in summaries:
        ranks.update(summary.ranks_seen)
        if summary.rank is not None:
            ranks.add(summary.rank)
    stats = Stats(
        bytes=sum(s.bytes for s in summaries),
        lines=sum(s.lines for s in summaries),
        ranks=len(ranks),
        seconds=time.monotonic() - started,
    )
    return ScanResult(observations=tuple(observations), sources=tuple(summaries), stats=stats)
