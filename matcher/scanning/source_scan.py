"""Scanning one source, or one span of a large plain file: blocks -> candidate lines -> observations.

Per block of whole lines the prefilter names the few candidate lines and, per line, the signatures that
may match it (`matcher.scanning.prefilter`); only those lines are numbered (a running newline count),
split into attributed fragments once (`prefixes.parse_segments`), and only those signatures' regexes run,
each with a timeout so no line can hang the scan (`matcher.scanning.regex_budget`). A pattern is tried on
each fragment's peeled text, then its raw form, then the whole physical line (progress-bar noise the
reader sets aside can carry a clue). `after = N` signatures see the next N lines (carried over a block
boundary, and past the end of a span); small pasted sources also get a second chance for keywords split
by a hard wrap (`matcher.scanning.rejoin`). Floods of context lines are sampled once they keep nothing
new (`matcher.scanning.flood`). Memory stays bounded: a block at a time, and a cap on observations per
signature, source and writer (a 400 MB log repeating one line yields a handful of observations, not
millions).

`scan_piece` scans one source or span into a `Piece`: what `matcher.scanning.scan` merges per source.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import regex

from matcher.model import FieldValue, Line, Observation
from matcher.reading import prefixes, read
from matcher.reading.read import ReadLimits, Source, Span
from matcher.scanning import rejoin
from matcher.scanning.catalog import Catalog, Signature, convert_fields
from matcher.scanning.flood import FloodControl, Turn
from matcher.scanning.prefetch import prefetched
from matcher.scanning.prefilter import Prefilter
from matcher.scanning.regex_budget import REGEX_TIMEOUT_S, RegexBudget

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
# Tail signatures (catalog.READS) are read from the last TAIL_BYTES of each source, from the end back:
# at most TAIL_PER_HEAD lines per line head (see CONTEXT_LINES_PER_HEAD) are parsed, and the search stops
# after TAIL_FULL_LINES lines in a row whose head is full, so a per-rank file costs a few parses (the
# last few collectives of each process are what a comparison across processes needs).
TAIL_BYTES = 64 * 1024
TAIL_PER_HEAD = 4
TAIL_FULL_LINES = 64


def match_all(
    signature: Signature, text: str, budget: RegexBudget, pattern: regex.Pattern[str] | None = None
) -> list[dict[str, FieldValue]]:
    """Fields of every distinct match in text (a pasted line may join several messages); empty when
    nothing matches or the regex runs out of time. `pattern`: the signature's, when the caller has it."""
    found: list[dict[str, FieldValue]] = []
    if not budget.allows(signature.id):
        return found
    try:
        for match in (pattern or signature.pattern).finditer(text, timeout=REGEX_TIMEOUT_S):
            fields = convert_fields(match.groupdict())
            if fields not in found:
                found.append(fields)
            if len(found) >= MAX_MATCHES_PER_LINE:
                break
    except TimeoutError:
        budget.spend(signature.id)
    return found


@dataclass(slots=True)
class _Record:
    """One candidate physical line: its attributed fragments (usually one) and its whole decoded text
    (decoded only when needed: when no fragment matched)."""

    segments: tuple[Line, ...]
    raw: bytes
    _pieces: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, raw: bytes, source: Source, lineno: int) -> _Record:
        return cls(prefixes.parse_segments(raw, source, lineno), raw)

    @property
    def pieces(self) -> tuple[str, ...]:
        """The physical line as written, before progress bars were set aside: the message of a container
        record, cut at its `\r` rewrites (a pattern's `$` must see the end of the message, not a bar
        redrawn after it or the record's JSON)."""
        if self._pieces is None:
            self._pieces = prefixes.written_pieces(self.raw)
        return self._pieces


@dataclass(frozen=True, slots=True)
class _Glue:
    """Lines of a wrapped run glued with a separator: the parsed record, the glued text and where its
    junctions are (the end of each line but the last, in characters; `width`: the separator's)."""

    record: _Record
    text: str
    junctions: tuple[int, ...]
    width: int

    @classmethod
    def of(cls, lines: list[bytes], separator: bytes, source: Source, lineno: int) -> _Glue:
        pieces = [line.decode("utf-8", errors="replace") for line in lines]
        junctions, at = [], 0
        for piece in pieces[:-1]:
            at += len(piece)
            junctions.append(at)
            at += len(separator)
        record = _Record.parse(separator.join(lines), source, lineno)
        return cls(record, separator.decode().join(pieces), tuple(junctions), len(separator))


@dataclass(slots=True)
class _Entry:
    """A catalog signature as the scanner runs it: its regex (compiled on first use: a run needs only the
    few signatures whose keywords occur) and how many named groups it has."""

    signature: Signature
    index: int  # in the catalog
    pattern: regex.Pattern[str] | None = None
    wanted: int = 0

    def compiled(self) -> regex.Pattern[str]:
        if self.pattern is None:
            self.pattern = self.signature.pattern
            self.wanted = len(self.pattern.groupindex)
        return self.pattern


@dataclass(frozen=True, slots=True)
class _Roles:
    context: frozenset[int]  # catalog indices of the context signatures
    index: dict[str, int]  # signature id -> catalog index
    entries: tuple[_Entry, ...]  # by catalog index
    tail: tuple[_Entry, ...]  # the signatures read from each source's end (catalog.READS)


_recent_roles: list[tuple[Catalog, _Roles]] = []


def _roles(catalog: Catalog) -> _Roles:
    """The catalog as the scanner runs it, built once per catalog (a bundle of a thousand small files
    creates a thousand scan states)."""
    for known, roles in _recent_roles:
        if known is catalog:
            return roles
    signatures = catalog.signatures
    roles = _Roles(
        context=frozenset(i for i, s in enumerate(signatures) if s.role == "context"),
        index={s.id: i for i, s in enumerate(signatures)},
        entries=tuple(_Entry(s, i) for i, s in enumerate(signatures)),
        tail=tuple(_Entry(s, i) for i, s in enumerate(signatures) if s.read == "tail"),
    )
    _recent_roles.append((catalog, roles))
    del _recent_roles[:-4]
    return roles


@dataclass(slots=True)
class _Pending:
    """A multi-line record (`after = N`) whose continuation lines lie in the next block."""

    entry: _Entry
    record: _Record
    lines: list[str]
    missing: int


@dataclass(slots=True)
class Seed:
    """What the first span of a large file learned, handed to its other spans: which writers are
    already full and how far asleep the context signatures are. Every later span starts from the first
    one's seed (never from its neighbour's), so the result does not depend on how many workers ran."""

    kept: Counter[tuple[object, ...]]
    kept_total: Counter[str]
    offered: Counter[tuple[int, bytes]]
    flood: FloodControl
    # Tail signatures: read from the source's end whatever the seed (see settles).
    tail: frozenset[str] = frozenset()


@dataclass(slots=True)
class Piece:
    """One source or span scanned: observations numbered from its first line, and its tallies."""

    observations: list[Observation]
    lines: int
    size: int
    first_time: float | None
    last_time: float | None
    ranks: set[int]
    head: bytes  # the start of its first block
    tail: bytes  # the end of its last block
    read_bytes: int = 0  # bytes of input read (`size` counts them after cleaning: cut lines, NULs)
    digest: str | None = None  # the content digest, when the piece is a whole source
    context_seen: bool = False  # whether any line was a candidate of a context signature
    seed: Seed | None = None

    # Pieces come back from worker processes: observations travel as plain tuples, which pickle at C
    # speed (a dataclass with slots pickles field by field, in Python).
    def __getstate__(self) -> dict[str, object]:
        state = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "observations"}
        state["observations"] = [_pack(o) for o in self.observations]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, [_unpack(o) for o in value] if name == "observations" else value)


def _pack(obs: Observation) -> tuple[object, ...]:
    line = obs.line
    return (
        obs.signature,
        obs.classes,
        obs.role,
        dict(obs.fields),
        obs.weight,
        obs.symptom,
        line.source,
        line.lineno,
        line.text,
        line.raw,
        line.rank,
        line.local_rank,
        line.host,
        line.pid,
        line.time,
    )


def _unpack(packed: tuple[Any, ...]) -> Observation:
    signature, classes, role, fields, weight, symptom, *line = packed
    return Observation(signature, classes, role, Line(*line), fields, weight, symptom)


@dataclass(slots=True)
class _SourceScan:
    """Running state of one source (or span) while its blocks go by."""

    source: Source
    catalog: Catalog
    observations: list[Observation]
    budget: RegexBudget
    kept: Counter[tuple[object, ...]] = field(default_factory=Counter)
    kept_total: Counter[str] = field(default_factory=Counter)
    lines: int = 0
    size: int = 0
    first_time: float | None = None
    last_time: float | None = None
    ranks: set[int] = field(default_factory=set)
    pending: list[_Pending] = field(default_factory=list)
    last: read.Block | None = None
    before_last: read.Block | None = None  # kept for the tail signatures (see _read_tail)
    offered: Counter[tuple[int, bytes]] = field(default_factory=Counter)
    head: bytes | None = None
    read_bytes: int = 0
    context_seen: bool = False
    flood: FloodControl = field(init=False)
    small: list[read.Block] | None = field(default_factory=list)  # the blocks while the source is small

    fresh: set[int] = field(default_factory=set)  # signatures that kept an observation on this line
    entries: tuple[_Entry, ...] = field(init=False)  # by catalog index
    tail: tuple[_Entry, ...] = field(init=False)  # the signatures read from the source's end
    tick: Callable[[], None] | None = None  # called between the regions of a block (see scan_piece)

    def __post_init__(self) -> None:
        roles = _roles(self.catalog)
        self.entries = roles.entries
        self.tail = roles.tail
        self.flood = FloodControl(roles.context)

    def block(self, block: read.Block, prefilter: Prefilter) -> None:
        data = block.data
        if self.head is None:
            self.head = bytes(data[:DIGEST_EDGE_BYTES])
        self.size += len(data)
        self.read_bytes = block.consumed
        self._finish_pending(data, block.first_lineno)
        cursor = _Cursor(block.first_lineno, block.lines, len(data))
        ascii = data.isascii()
        position = 0
        while position < len(data):
            # Awake, a region is a slice, so that a flood is noticed early; asleep, the rest of the block.
            end = len(data) if self.flood.sampling else _line_end(data, position + SLICE_BYTES)
            position = self._region(data, position, end, prefilter, cursor, ascii)
            if self.tick is not None and position < len(data):
                self.tick()
        self.lines += block.lines
        if len(block.data) < TAIL_BYTES and self.last is not None and self.tail:
            self.before_last = self.last  # a short last block: the source's tail reaches into this one
        else:
            self.before_last = None
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
        ascii: bool,
    ) -> int:
        """Scans data[begin:end] (whole lines; `ascii`: whether all of data is); returns where the next
        region starts: `end`, or the line after the one that put context signatures to sleep or woke
        them up."""
        flood = self.flood
        candidates = prefilter.candidates(
            data, sample_context=flood.sampling, begin=begin, end=end, ascii=ascii
        )
        context, fresh = flood.context, self.fresh
        for start, stop, signatures in candidates:
            chosen, had_context = flood.choose(signatures)
            if not had_context:  # root and cascade signatures only: always looked at
                self._candidate(data, start, stop, cursor.advance(data, start), chosen)
                continue
            self.context_seen = True
            looked: list[int] = []
            fresh.clear()
            if chosen:
                active = self._worth_parsing(data, start, chosen)
                if active:
                    self._candidate(data, start, stop, cursor.advance(data, start), active)
                    looked = [i for i in active if i in context]
            productive = [i for i in looked if i in fresh] if fresh else []
            if flood.outcome(looked, productive) is not Turn.GO_ON:
                return stop + 1
        return end

    def _candidate(self, data: bytes, start: int, stop: int, lineno: int, active: list[int]) -> None:
        record = _Record.parse(data[start:stop], self.source, lineno)
        for segment in record.segments:
            if segment.time is not None or segment.rank is not None:
                self._note_line(segment)
        for index in active:
            entry = self.entries[index]
            after = entry.signature.after
            if not after:
                self._try(entry, record, [])
                continue
            following = _following_lines(data, stop, after)
            texts = [self._text_of(raw, lineno + 1 + i) for i, raw in enumerate(following)]
            if len(following) < after:  # the record may go on in the next block
                self.pending.append(_Pending(entry, record, texts, after - len(following)))
            else:
                self._try(entry, record, texts)

    def _worth_parsing(self, data: bytes, start: int, signatures: list[int]) -> list[int]:
        """The candidate signatures still worth a parse of this line (see CONTEXT_LINES_PER_HEAD);
        called for lines with a context signature (root and cascade lines are always parsed)."""
        head = _line_head(data, start)
        if head is None:  # no head: every signature is worth it
            return signatures
        active = []
        context, offered = self.flood.context, self.offered
        for index in signatures:
            if index in context:
                key = (index, head)
                seen = offered.get(key, 0) + 1  # `get`: a Counter's own miss runs Python code
                offered[key] = seen
                if seen > CONTEXT_LINES_PER_HEAD:
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
                self._try(self.entries[index], record, [])

    def _rejoin_wraps(self, block: read.Block, prefilter: Prefilter) -> None:
        """Pasted excerpts: a message a hard wrap cut over several lines, which its keyword line alone
        does not complete (see `matcher.scanning.rejoin.wrapped_runs`)."""
        lines = [line.rstrip(b"\r") for line in block.data.split(b"\n")]
        runs = rejoin.wrapped_runs(lines)
        if not runs:
            return
        snippets = [sep.join(lines[first : last + 1]) for first, last in runs for sep in rejoin.SEPARATORS]
        wanted: list[set[int]] = [set() for _ in snippets]
        starts, position = [], 0
        for snippet in snippets:
            starts.append(position)
            position += len(snippet) + 1
        which = 0
        for candidate in prefilter.lines(b"\n".join(snippets)):
            while which + 1 < len(starts) and starts[which + 1] <= candidate.start:
                which += 1
            wanted[which].update(
                i for i in candidate.signatures if self.entries[i].signature.role != "context"
            )
        glues: dict[tuple[int, int, bytes], _Glue] = {}  # each glue parsed once, for all its candidates
        found: dict[int, set[str]] = {}
        for obs in self.observations:
            found.setdefault(obs.line.lineno, set()).add(obs.signature)
        for number, signatures in enumerate(wanted):
            first, last = runs[number // len(rejoin.SEPARATORS)]
            separator = rejoin.SEPARATORS[number % len(rejoin.SEPARATORS)]
            for index in sorted(signatures):
                entry = self.entries[index]
                lineno = block.first_lineno + first
                if any(entry.signature.id in found.get(lineno + k, ()) for k in range(last - first + 1)):
                    continue
                if self._try_wrapped(entry, lines, first, last, separator, block.first_lineno, glues):
                    found.setdefault(lineno, set()).add(entry.signature.id)

    def _try_wrapped(
        self,
        entry: _Entry,
        lines: list[bytes],
        first: int,
        last: int,
        separator: bytes,
        first_lineno: int,
        glues: dict[tuple[int, int, bytes], _Glue],
    ) -> bool:
        """The signature on lines head..end of a wrapped run glued, kept where a match crosses a
        junction; the shortest such glue from the earliest head wins. The whole run is tried first: most
        candidates match nowhere across a junction of it, and then no shorter glue is worth a parse."""

        def glued(head: int, end: int) -> _Glue:
            key = (head, end, separator)
            if key not in glues:
                glues[key] = _Glue.of(lines[head : end + 1], separator, self.source, first_lineno + head)
            return glues[key]

        if not self._crossing(entry, glued(first, last)):
            return False
        for head in range(first, last):
            for end in range(head + 1, last + 1):
                kept = self._crossing(entry, glued(head, end))
                if kept:
                    self._keep(entry, kept)
                    return True
        return False  # pragma: no cover - the whole run is one of the glues tried

    def _crossing(self, entry: _Entry, glue: _Glue) -> list[tuple[Line, dict[str, FieldValue]]]:
        """Matches of the signature on glued lines that run across a junction."""
        pattern = entry.compiled()
        text, junctions, width = glue.text, glue.junctions, glue.width
        kept: list[tuple[Line, dict[str, FieldValue]]] = []
        for segment in glue.record.segments:
            offset = len(text) - len(segment.text)
            if offset < 0 or not text.endswith(segment.text) or not self.budget.allows(entry.signature.id):
                continue
            try:
                for match in pattern.finditer(segment.text, timeout=REGEX_TIMEOUT_S):
                    begin, finish = match.start() + offset, match.end() + offset
                    if any(begin < j and finish > j + width for j in junctions):
                        kept.append((segment, convert_fields(match.groupdict())))
                        break
            except TimeoutError:
                self.budget.spend(entry.signature.id)
        return kept

    def finish(self, prefilter: Prefilter, following: bytes = b"", at_end: bool = True) -> Piece:
        """The piece scanned; `following` holds the lines after a span, for records still missing lines;
        `at_end`: the piece ends its source, whose tail signatures are read then."""
        for block in self.small or ():
            self._rejoin(block, prefilter)
            self._rejoin_wraps(block, prefilter)
        self.small = None
        tail = b""
        if self.last is not None:
            tail = self.last.data[-DIGEST_EDGE_BYTES:]
            if at_end and self.tail:
                self._read_tail([self.last] if self.before_last is None else [self.last, self.before_last])
            self.last = self.before_last = None
        if self.pending and following:
            self._finish_pending(following, self.lines + 1)
        for pending in self.pending:
            self._try(pending.entry, pending.record, pending.lines)
        self.pending = []
        # Multi-line records and re-joined wraps finish late: keep the observations in file order, and
        # the signatures of one line in catalog order (a record waiting for its next line must not come
        # after or before the others depending on where a block ended).
        order = _roles(self.catalog).index
        self.observations.sort(key=lambda o: (o.line.lineno, order.get(o.signature, len(order))))
        return Piece(
            observations=self.observations,
            lines=self.lines,
            size=self.size,
            first_time=self.first_time,
            last_time=self.last_time,
            ranks=self.ranks,
            head=self.head or b"",
            tail=tail,
            read_bytes=self.read_bytes,
            context_seen=self.context_seen,
        )

    def _read_tail(self, blocks: list[read.Block]) -> None:
        """The tail signatures' last records: lines of the source's last TAIL_BYTES (`blocks`: its last
        block and, when that one is shorter, the one before) holding a keyword, from the end back, the
        last TAIL_PER_HEAD of each line head."""
        for entry in self.tail:
            per_head: Counter[bytes] = Counter()
            full_in_a_row = 0
            for block, start, lineno in _tail_lines(blocks, entry.signature.keywords):
                data = block.data
                head = _line_head(data, start) or data[start : start + 160]
                if per_head[head] >= TAIL_PER_HEAD:
                    full_in_a_row += 1
                    if full_in_a_row >= TAIL_FULL_LINES:
                        break
                    continue
                full_in_a_row = 0
                per_head[head] += 1
                stop = data.find(b"\n", start)
                record = _Record.parse(data[start : len(data) if stop < 0 else stop], self.source, lineno)
                found = _matches(entry.signature, record, [], self.budget)
                if found:
                    self._keep(entry, found)

    def seed(self) -> Seed:
        return Seed(
            Counter(self.kept),
            Counter(self.kept_total),
            Counter(self.offered),
            replace(self.flood),
            frozenset(e.signature.id for e in self.tail),
        )

    def plant(self, seed: Seed) -> None:
        self.kept, self.kept_total, self.offered = (
            Counter(seed.kept),
            Counter(seed.kept_total),
            Counter(seed.offered),
        )
        self.flood = replace(
            seed.flood,
            quiet_of=Counter(seed.flood.quiet_of),
            dozing=set(seed.flood.dozing),
            skipped=Counter(seed.flood.skipped),
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
                self._try(pending.entry, pending.record, pending.lines)
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

    def _try(self, entry: _Entry, record: _Record, continuation: list[str]) -> None:
        found = _matches(entry.signature, record, continuation, self.budget, entry)
        if found:
            self._keep(entry, found)

    def _keep(self, entry: _Entry, found: list[tuple[Line, dict[str, FieldValue]]]) -> None:
        signature = entry.signature
        signature_id = signature.id
        kept, kept_total = self.kept, self.kept_total
        for line, fields in found:
            writer = writer_of(signature_id, line, fields)
            # `get`: a Counter's own lookup of a missing key runs Python code (`__missing__`).
            if kept.get(writer, 0) >= MAX_PER_WRITER or kept_total.get(signature_id, 0) >= MAX_PER_SOURCE:
                continue
            kept[writer] += 1
            kept_total[signature_id] += 1
            self.fresh.add(entry.index)
            self.observations.append(
                Observation(
                    signature_id,
                    signature.classes,
                    signature.role,
                    line,
                    fields,
                    signature.weight,
                    signature.symptom,
                )
            )


def content_digest(size: int, head: bytes, tail: bytes) -> str:
    """A source's `SourceSummary.content_digest`: its size, the start of its first block and the end of
    its last one."""
    digest = hashlib.blake2b(str(size).encode(), digest_size=16)
    digest.update(head)
    digest.update(tail)
    return digest.hexdigest()


def writer_of(signature_id: str, line: Line, fields: Mapping[str, FieldValue]) -> tuple[object, ...]:
    """What tells the processes apart that the caps count per (see MAX_PER_WRITER)."""
    return (signature_id, line.rank, line.host, line.pid, fields.get("rank"), fields.get("pg_rank"))


def settles(seed: Seed, guess: Piece) -> bool:
    """Whether a span scanned on a guess, before its file's first span was done, came out as it would
    have from that span's seed. The guess samples from its first line and never wakes; a run from the
    seed samples the same lines as long as none of them says something new to the seed, so it is the
    same run when the seed ended sampling and every context observation of the guess belongs to a
    writer the seed already has in full (what else differs, the caps, is applied again at the merge);
    and when the span holds no context line at all, however the seed ended. Tail signatures are read
    from the source's end alike in every mode."""
    if not guess.context_seen:  # no context line at all in the span: every mode reads it alike
        return True
    if not seed.flood.sampling:
        return False
    for obs in guess.observations:
        if obs.role != "context" or obs.signature in seed.tail:
            continue
        full = seed.kept[writer_of(obs.signature, obs.line, obs.fields)] >= MAX_PER_WRITER
        if not full and seed.kept_total[obs.signature] < MAX_PER_SOURCE:
            return False
    return True


def _matches(
    signature: Signature,
    record: _Record,
    continuation: list[str],
    budget: RegexBudget,
    entry: _Entry | None = None,
) -> list[tuple[Line, dict[str, FieldValue]]]:
    """Where the signature matches a candidate line: each fragment's peeled text, else its unpeeled form
    (peeling can go wrong on damaged lines); when no fragment matches, each `\r` piece of the physical
    line as written (see `_Record.pieces`), which still holds what the reader set aside as progress-bar
    noise (`Running tokenizer ... 88%|###`).
    `entry`: the scanner's compiled form of the signature."""

    entry = entry or _Entry(signature, -1)
    pattern = entry.compiled()
    wanted = entry.wanted
    found: list[tuple[Line, dict[str, FieldValue]]] = []
    for segment in record.segments:
        text, raw = segment.text, segment.raw
        matches = match_all(signature, _joined(text, continuation), budget, pattern)
        if raw and raw != text and (not matches or len(matches[0]) < wanted):
            # Patterns may also read the prefix (a host, a pid): the raw line fills what the text lacks.
            extra = match_all(signature, _joined(raw, continuation), budget, pattern)
            if extra and matches:
                matches[0] = {**extra[0], **matches[0]}
            elif extra:
                matches = extra
        for fields in matches:
            found.append((segment, fields))
    if found:
        return found
    last = record.segments[-1]
    for piece in record.pieces:
        if any(piece == segment.raw for segment in record.segments):
            continue
        matches = match_all(signature, _joined(piece, continuation), budget, pattern)
        if matches:
            whole = replace(last, text=piece, raw=piece[: prefixes.RAW_CAP])
            return [(whole, fields) for fields in matches]
    return found


def _joined(text: str, continuation: list[str]) -> str:
    """A line's text with the continuation lines of an `after = N` signature."""
    return "\n".join([text, *continuation]) if continuation else text


def match_lines(
    signature: Signature, lines: list[bytes], source: Source
) -> list[tuple[Line, dict[str, FieldValue]]]:
    """What the scanner extracts with `signature` from a candidate line (and, for `after = N`
    signatures, its continuation lines): the catalog example test runs every example through this."""
    record = _Record.parse(lines[0], source, 1)
    continuation = [prefixes.parse_line(raw, source, 2 + i).text for i, raw in enumerate(lines[1:])]
    return _matches(signature, record, continuation, RegexBudget([signature.id]))


@dataclass(slots=True)
class _Cursor:
    """Line numbers of a block's candidate lines (starts in increasing order): newlines are counted
    from the previous candidate line, or back from the end of the block where that is nearer (`lines`:
    the block's line count, `size`: its length; 0 when unknown), so that candidates at both ends of a
    block (a process's set-up lines, its last errors) cost a count of little more than the block."""

    first: int
    lines: int = 0
    size: int = 0
    lineno: int = 0
    counted_to: int = 0

    def __post_init__(self) -> None:
        self.lineno = self.first

    def advance(self, data: bytes, start: int) -> int:
        if self.size and start - self.counted_to > self.size - start:
            self.lineno = self.first + self.lines - data.count(b"\n", start, self.size)
        else:
            self.lineno += data.count(b"\n", self.counted_to, start)
        self.counted_to = start
        return self.lineno


def _tail_lines(blocks: list[read.Block], keywords: tuple[str, ...]) -> Iterator[tuple[read.Block, int, int]]:
    """(block, line start, line number) of the lines holding a keyword in the last TAIL_BYTES of
    `blocks` (newest first; blocks end at line ends), the last first."""
    words = [k.encode() for k in keywords]
    left = TAIL_BYTES
    for block in blocks:
        data = block.data
        floor = max(0, len(data) - left)
        floor = data.find(b"\n", floor - 1) + 1 if floor else 0
        left -= len(data) - floor
        end, newlines_after = len(data), 0  # the last line start found, and the newlines from it on
        while True:
            at = max(data.rfind(word, floor, end) for word in words)
            if at < 0:
                break
            start = data.rfind(b"\n", floor, at) + 1 or floor
            newlines_after += data.count(b"\n", start, end)
            end = start
            yield block, start, block.first_lineno + block.lines - newlines_after
        if left <= 0:
            return


def _line_head(data: bytes, start: int) -> bytes | None:
    """The first three tokens of the line at `start` (within its first 160 bytes), None when it has
    fewer: NCCL's `host:pid:tid [dev] NCCL` is the same on every line of one process, while heads that
    start with a clock (syslog, glog) change every second."""
    limit = start + 160
    end = data.find(b" ", start + 1, limit)
    if end >= 0:
        end = data.find(b" ", end + 1, limit)
    if end >= 0:
        end = data.find(b" ", end + 1, limit)
    return None if end < 0 else data[start:end]


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


def scan_piece(
    source: Source,
    catalog: Catalog,
    prefilter: Prefilter,
    limits: ReadLimits,
    budget: RegexBudget,
    *,
    span: Span | None = None,
    seed: Seed | None = None,
    give_seed: bool = False,
    guess: bool = False,
    read_ahead: bool = True,
    progress: Callable[[int], None] | None = None,
    tick: Callable[[], None] | None = None,
) -> Piece:
    """Scan a whole source, or one span of a plain file (`seed`: the first span's, for the others;
    `give_seed`: return this span's for them; `guess`: a later span scanned before the first span is
    done, sampling context lines throughout, to be checked with `settles`; `read_ahead`: read the next
    blocks in a helper thread, worth it only while a core is free; `progress`: called after each block
    with its size; `tick`: between the regions of a block too, a few per MiB where context lines are
    looked at: a block of set-up lines takes a tenth of a second, too long for waiting workers)."""
    state = _SourceScan(source, catalog, [], budget, tick=tick)
    if source.bundled or (span is not None and (span.begin or span.end is not None)):
        state.small = None  # wraps are re-joined in pasted excerpts: never a bundle's files or a big file
    if seed is not None:
        state.plant(seed)
    if guess:
        state.flood.sampling = state.flood.held = True
    blocks = read.iter_blocks(source, limits, span)
    for block in prefetched(blocks) if read_ahead else blocks:
        state.block(block, prefilter)
        if progress is not None:
            progress(len(block.data))
    following = b""
    if span is not None and span.end is not None and state.pending:
        wanted = max(pending.missing for pending in state.pending)
        following = read.read_lines_after(source, span.end, wanted, limits)
    piece = state.finish(prefilter, following, at_end=span is None or span.end is None)
    if give_seed:
        piece.seed = state.seed()
    # What the merge needs of the edges, no more (pieces of a thousand files wait in memory there): a
    # whole source's digest, else the first span's head and the last span's tail.
    whole = span is None or (span.begin == 0 and span.end is None)
    if whole:
        piece.digest = content_digest(piece.size, piece.head, piece.tail)
        piece.head = piece.tail = b""
    elif span is not None:
        piece.head = piece.head if span.begin == 0 else b""
        piece.tail = piece.tail if span.end is None else b""
    return piece
