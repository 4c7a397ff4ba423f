"""Scanner: text sources -> observations, per-source summaries and stats.

Interface: `scan(sources, catalog, limits, progress=None) -> ScanResult`.

Each source is scanned by `matcher.scanning.source_scan`, in input order, as the reader yields it
(archive members and stdin stream once). A plain file larger than FIRST_SPAN_BYTES is cut at line
boundaries into spans (`read.plan_spans`): the first span hands what it learned (full writers, sleeping
context signatures) to the others. Once the plain bytes seen reach PARALLEL_MIN_BYTES, plain files and
spans go to worker processes (`matcher.scanning.pool`) while this process scans the rest; there the
later spans do not wait for the first: they are scanned on a guess at once and again from the first
span's seed only where the guess proves wrong (`source_scan.settles`). Pieces are merged per source in
file order, and the per-writer caps are applied again over the merged observations. The spans, the seeds
and so the result are the same whether one worker or eight run them. Flight Recorder sources are
skipped: the pipeline reads them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import BinaryIO

from matcher.model import Observation, ScanResult, SourceSummary, Stats
from matcher.reading import read
from matcher.reading.read import ReadLimits, Source, Span
from matcher.scanning.catalog import Catalog
from matcher.scanning.pool import Pending, Workers, process_context, worker_count
from matcher.scanning.prefilter import Prefilter, prefilter_for
from matcher.scanning.regex_budget import RegexBudget
from matcher.scanning.source_scan import (
    CONTEXT_LINES_PER_HEAD,
    MAX_PER_SOURCE,
    MAX_PER_WRITER,
    Piece,
    Seed,
    content_digest,
    match_lines,
    scan_piece,
    settles,
    writer_of,
)

# Re-exported: the caps belong to the scanner's contract (the analysis reads MAX_PER_WRITER).
__all__ = [
    "CONTEXT_LINES_PER_HEAD",
    "MAX_PER_SOURCE",
    "MAX_PER_WRITER",
    "match_lines",
    "prefilter_for",
    "scan",
]

# A plain file above this size is cut into spans: the first of about this size (where a job's set-up
# lines are), the others of SPAN_BYTES (small enough to balance two to eight workers).
FIRST_SPAN_BYTES = 16 * 1024**2
SPAN_BYTES = 32 * 1024**2
# Worker processes start only once this many plain bytes were seen: below it they cost more than they save.
PARALLEL_MIN_BYTES = 48 * 1024**2
# Plain files held back at most while that is decided (each waits as a small `Source`).
MAX_HELD = 1024


@dataclass
class _Slot:
    """One text source's pieces, in file order, as they are scanned here or come back from workers."""

    source: Source
    pieces: list[Piece | Pending] = field(default_factory=list)
    # A split file scanned by workers: its later spans, scanned on a guess while the first one runs.
    guesses: list[tuple[Span, Pending]] = field(default_factory=list)

    def results(self, rescan: Callable[[Span, Seed], Pending]) -> list[Piece]:
        got = [p.get() if isinstance(p, Pending) else p for p in self.pieces]
        if not self.guesses:
            return got
        seed = got[0].seed
        assert seed is not None
        checked: list[Piece | Pending] = []
        for span, pending in self.guesses:
            guess = pending.get()
            checked.append(guess if settles(seed, guess) else rescan(span, seed))
        return got + [p.get() if isinstance(p, Pending) else p for p in checked]


class _Scanner:
    def __init__(
        self,
        catalog: Catalog,
        limits: ReadLimits,
        progress: Callable[[int], None] | None,
        budget: RegexBudget | None,
    ) -> None:
        self.catalog = catalog
        self.limits = limits
        self.prefilter: Prefilter = prefilter_for(catalog)
        self.workers_wanted = worker_count()
        if budget is not None and not budget.shared:
            self.workers_wanted = 1  # a budget in this process's memory only: workers could not share it
        self.context = budget.context if budget is not None and budget.context else process_context()
        ids = (s.id for s in catalog)
        self.budget = budget or RegexBudget(ids, context=self.context if self.workers_wanted > 1 else None)
        self.workers: Workers | None = None
        self.plain_bytes = 0
        self.done = 0
        self.on_progress = progress

    def progress(self, size: int) -> None:
        if self.on_progress is None:
            return
        self.done += size
        self.on_progress(self.done)

    def scanned_here(self, size: int) -> None:
        """A block scanned in this process: results of the workers are taken in, and the next tasks
        handed out, between blocks too (a compressed file scanned here would otherwise starve them)."""
        if self.workers is not None:
            self.workers.collect(block=False)
        self.progress(size)

    def slots(self, sources: list[Source]) -> list[_Slot]:
        """Slots for sources in input order; workers start first when the plain files among them (and
        those before) are enough to pay for them."""
        plain = sum(source.size or 0 for source in sources if source.path is not None)
        if (
            self.workers is None
            and self.workers_wanted > 1
            and self.plain_bytes + plain >= PARALLEL_MIN_BYTES
        ):
            self.workers = Workers(self.workers_wanted, self.catalog, self.limits, self.budget, self.context)
        return [self.slot(source) for source in sources]

    def deciding(self, source: Source) -> bool:
        """Whether a plain file is best held back until more of the input is known: while too few plain
        bytes have been seen to start workers, and they may still come."""
        return self.workers is None and self.workers_wanted > 1 and source.path is not None

    def slot(self, source: Source) -> _Slot:
        slot = _Slot(source)
        spans = read.plan_spans(source, self.limits, FIRST_SPAN_BYTES, SPAN_BYTES) if source.path else []
        if source.path is not None:
            self.plain_bytes += source.size or 0
        if self.workers is None and self.workers_wanted > 1 and self.plain_bytes >= PARALLEL_MIN_BYTES:
            self.workers = Workers(self.workers_wanted, self.catalog, self.limits, self.budget, self.context)
        if self.workers is not None and source.path is not None:
            self._submit(slot, spans)
        elif len(spans) > 1:
            first = self._here(source, spans[0], None, give_seed=True)
            slot.pieces = [first, *(self._here(source, span, first.seed, False) for span in spans[1:])]
        else:
            slot.pieces = [self._here(source, None, None, False)]
        # The slot waits for the merge: it keeps the source's name and hints, not its opener (a closure
        # over the reader's streams; a tar of 100k members would keep them all alive).
        slot.source = replace(source, opener=_spent)
        return slot

    def _here(self, source: Source, span: Span | None, seed: Seed | None, give_seed: bool) -> Piece:
        return scan_piece(
            source,
            self.catalog,
            self.prefilter,
            self.limits,
            self.budget,
            span=span,
            seed=seed,
            give_seed=give_seed,
            read_ahead=self.workers is None,  # with workers running, every core is taken
            progress=self.scanned_here,
        )

    def _submit(self, slot: _Slot, spans: list[Span]) -> None:
        """Plain files to the workers. The later spans of a split file do not wait for the first one:
        they are scanned on a guess at once (`source_scan.settles`), and again from the first span's seed
        only where the guess turns out wrong, so the result is the same as waiting."""
        workers = self.workers
        assert workers is not None
        source, done = slot.source, self._piece_done
        if len(spans) <= 1:
            slot.pieces = [workers.submit(source, None, done=done)]
            return
        slot.pieces = [workers.submit(source, spans[0], give_seed=True, done=done, here=True)]
        slot.guesses = [(span, workers.submit(source, span, guess=True, done=done)) for span in spans[1:]]

    def rescan(self, source: Source) -> Callable[[Span, Seed], Pending]:
        def again(span: Span, seed: Seed) -> Pending:
            assert self.workers is not None  # guesses are only made by workers
            return self.workers.submit(source, span, seed)

        return again

    def _piece_done(self, piece: Piece) -> None:
        self.progress(piece.size)


def _spent() -> BinaryIO:
    raise RuntimeError("a source already scanned is not read again")


def scan(
    sources: Iterable[Source],
    catalog: Catalog,
    limits: ReadLimits | None = None,
    progress: Callable[[int], None] | None = None,
    budget: RegexBudget | None = None,
) -> ScanResult:
    """Scan `sources` (see the module note). `budget`: the diagnosis's regex time budget, when the
    caller scans in several calls; by default each call is one diagnosis with a budget of its own."""
    started = time.monotonic()
    scanner = _Scanner(catalog, limits or ReadLimits(), progress, budget)
    slots: list[_Slot] = []
    # Plain files held back while it is not known whether workers will pay (a folder of logs is listed
    # faster than it is scanned: its first files go to the workers too, not to this process).
    held: list[Source] = []
    held_bytes = 0
    try:
        for source in sources:
            if source.kind != "text":
                continue  # Flight Recorder dumps are read by the pipeline, not scanned as text.
            if scanner.deciding(source):
                held.append(source)
                held_bytes += source.size or 0
                if scanner.plain_bytes + held_bytes < PARALLEL_MIN_BYTES and len(held) < MAX_HELD:
                    continue
                ready = held
            else:
                ready = [*held, source]
            slots += scanner.slots(ready)
            held, held_bytes = [], 0
        slots += scanner.slots(held)
        merged = [_merge(slot.source, slot.results(scanner.rescan(slot.source))) for slot in slots]
    except BaseException:
        if scanner.workers is not None:
            scanner.workers.close(abandon=True)
        raise
    if scanner.workers is not None:
        scanner.workers.close()
    observations = [o for found, _, _ in merged for o in found]
    summaries = [summary for _, summary, _ in merged]
    ranks: set[int] = set()
    for summary in summaries:
        ranks.update(summary.ranks_seen)
        if summary.rank is not None:
            ranks.add(summary.rank)
    stats = Stats(
        bytes=sum(read_bytes for _, _, read_bytes in merged),
        lines=sum(s.lines for s in summaries),
        ranks=len(ranks),
        seconds=time.monotonic() - started,
    )
    return ScanResult(observations=tuple(observations), sources=tuple(summaries), stats=stats)


def _merge(source: Source, pieces: list[Piece]) -> tuple[list[Observation], SourceSummary, int]:
    """One source's pieces -> its observations in file order (line numbers continued from piece to
    piece, the per-writer caps applied again), its summary and the bytes read from it."""
    observations: list[Observation] = []
    base = 0
    keep = _Caps() if len(pieces) > 1 else None
    for piece in pieces:
        kept = piece.observations if keep is None else [o for o in piece.observations if keep(o)]
        if base:  # numbered from the piece's first line: renumbered once capped (most later ones go)
            kept = [replace(o, line=replace(o.line, lineno=o.line.lineno + base)) for o in kept]
        observations += kept
        base += piece.lines
    size = sum(piece.size for piece in pieces)
    digest = pieces[0].digest or content_digest(size, pieces[0].head, pieces[-1].tail)
    times = [t for piece in pieces for t in (piece.first_time, piece.last_time) if t is not None]
    summary = SourceSummary(
        name=source.name,
        rank=source.rank,
        host=source.host,
        lines=base,
        bytes=sum(piece.read_bytes for piece in pieces),
        first_time=min(times) if times else None,
        last_time=max(times) if times else None,
        ranks_seen=tuple(sorted({rank for piece in pieces for rank in piece.ranks})),
        content_digest=digest,
        labels_are_ranks=source.labels_are_ranks,
    )
    return observations, summary, sum(piece.read_bytes for piece in pieces)


class _Caps:
    """Called on a split file's observations in file order: whether each is among the first
    MAX_PER_WRITER per signature and writer, MAX_PER_SOURCE per signature, which is what one pass over
    the whole file keeps (see `source_scan._SourceScan._try`)."""

    def __init__(self) -> None:
        self.kept: dict[tuple[object, ...], int] = {}
        self.total: dict[str, int] = {}

    def __call__(self, obs: Observation) -> bool:
        writer = writer_of(obs.signature, obs.line, obs.fields)
        seen, total = self.kept.get(writer, 0), self.total.get(obs.signature, 0)
        if seen >= MAX_PER_WRITER or total >= MAX_PER_SOURCE:
            return False
        self.kept[writer] = seen + 1
        self.total[obs.signature] = total + 1
        return True
