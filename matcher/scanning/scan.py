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

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from multiprocessing.pool import AsyncResult
from typing import BinaryIO

from matcher.model import Observation, ScanResult, SourceSummary, Stats
from matcher.reading import read
from matcher.reading.read import ReadLimits, Source, Span
from matcher.scanning.catalog import Catalog
from matcher.scanning.pool import Workers, process_context, worker_count
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


@dataclass
class _Slot:
    """One text source's pieces, in file order, as they are scanned here or come back from workers."""

    source: Source
    pieces: list[Piece | AsyncResult[Piece]] = field(default_factory=list)
    # A split file scanned by workers: its later spans, scanned on a guess while the first one runs.
    guesses: list[tuple[Span, AsyncResult[Piece]]] = field(default_factory=list)

    def results(self, rescan: Callable[[Span, Seed], AsyncResult[Piece]]) -> list[Piece]:
        got = [p.get() if isinstance(p, AsyncResult) else p for p in self.pieces]
        if not self.guesses:
            return got
        seed = got[0].seed
        assert seed is not None
        checked: list[Piece | AsyncResult[Piece]] = []
        for span, pending in self.guesses:
            guess = pending.get()
            checked.append(guess if settles(seed, guess) else rescan(span, seed))
        return got + [p.get() if isinstance(p, AsyncResult) else p for p in checked]


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
        self.lock = threading.Lock()
        self.on_progress = progress

    def progress(self, size: int) -> None:
        if self.on_progress is None:
            return
        with self.lock:  # pieces come back on the pool's result thread
            self.done += size
            done = self.done
        self.on_progress(done)

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
            progress=self.progress,
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
        slot.pieces = [workers.submit(source, spans[0], give_seed=True, done=done)]
        slot.guesses = [(span, workers.submit(source, span, guess=True, done=done)) for span in spans[1:]]

    def rescan(self, source: Source) -> Callable[[Span, Seed], AsyncResult[Piece]]:
        def again(span: Span, seed: Seed) -> AsyncResult[Piece]:
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
    try:
        for source in sources:
            if source.kind != "text":
                continue  # Flight Recorder dumps are read by the pipeline, not scanned as text.
            slots.append(scanner.slot(source))
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
    for piece in pieces:
        if base:
            observations += (
                replace(o, line=replace(o.line, lineno=o.line.lineno + base)) for o in piece.observations
            )
        else:
            observations += piece.observations
        base += piece.lines
    if len(pieces) > 1:
        observations = _capped(observations)
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
    )
    return observations, summary, sum(piece.read_bytes for piece in pieces)


def _capped(observations: list[Observation]) -> list[Observation]:
    """The first MAX_PER_WRITER observations per signature and writer, MAX_PER_SOURCE per signature, in
    file order: what one pass over the whole file keeps (see `source_scan._SourceScan._keep`)."""
    kept: Counter[tuple[object, ...]] = Counter()
    total: Counter[str] = Counter()
    out: list[Observation] = []
    for obs in observations:
        line, fields = obs.line, obs.fields
        writer = (obs.signature, line.rank, line.host, line.pid, fields.get("rank"), fields.get("pg_rank"))
        if kept[writer] >= MAX_PER_WRITER or total[obs.signature] >= MAX_PER_SOURCE:
            continue
        kept[writer] += 1
        total[obs.signature] += 1
        out.append(obs)
    return out
