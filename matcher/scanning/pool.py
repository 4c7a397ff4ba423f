"""Worker processes for the scanner: pieces of plain files scanned on every core.

A plain file on disk can be read by another process from its path (`Source.path`), so the scanner hands
such files, and the spans of large ones, to a pool of worker processes while it goes on with the rest
(archive members, compressed files, stdin) itself. Workers are forked from the scanning process, so they
start in milliseconds with its catalog and compiled Hyperscan databases already in memory; a process
that runs other threads (a server) gets workers from a fork server instead, since forking a threaded
process is unsafe. Each worker holds one piece at a time (a block of about 1 MiB and that piece's
observations), so memory per worker stays bounded; the regex budget is shared memory
(`matcher.scanning.regex_budget`), one for the whole diagnosis.

`NCCLBOT_WORKERS` sets the number of workers (default: the cores this process may run on, at most
MAX_WORKERS; 1 scans everything in-process).
"""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.pool
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.context import BaseContext
from typing import BinaryIO

from matcher.model import InputError
from matcher.reading.read import ReadLimits, Source, Span
from matcher.scanning.catalog import Catalog
from matcher.scanning.prefilter import prefilter_for
from matcher.scanning.regex_budget import RegexBudget
from matcher.scanning.source_scan import Piece, Seed, scan_piece

ENV_WORKERS = "NCCLBOT_WORKERS"
MAX_WORKERS = 8

# Set in each worker by `_start`: what every piece of one diagnosis is scanned with.
_job: tuple[Catalog, ReadLimits, RegexBudget] | None = None


def worker_count() -> int:
    value = os.environ.get(ENV_WORKERS, "").strip()
    if value:
        try:
            return max(int(value), 1)
        except ValueError:
            raise InputError(f"{ENV_WORKERS}={value!r} is not a number of worker processes") from None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def process_context() -> BaseContext:
    """How workers start: forked while this process runs a single thread (forking a threaded process is
    unsafe), else from a fork server."""
    return multiprocessing.get_context("fork" if threading.active_count() == 1 else "forkserver")


class Workers:
    """A pool of scanning processes for one diagnosis (`context`: `process_context()`, or the one the
    shared regex budget was made for)."""

    def __init__(
        self, count: int, catalog: Catalog, limits: ReadLimits, budget: RegexBudget, context: BaseContext
    ) -> None:
        forking = context.get_start_method() == "fork"
        if forking:
            # What the workers inherit (catalog, compiled patterns, modules) is never garbage: frozen, the
            # collector in each worker neither walks it nor touches (and so copies) its pages. This
            # process thaws it again once the workers are forked.
            gc.freeze()
        try:
            self._pool = context.Pool(count, initializer=_start, initargs=(catalog, limits, budget))
        finally:
            if forking:
                gc.unfreeze()

    def submit(
        self,
        source: Source,
        span: Span | None,
        seed: Seed | None = None,
        give_seed: bool = False,
        guess: bool = False,
        done: Callable[[Piece], None] | None = None,
    ) -> multiprocessing.pool.AsyncResult[Piece]:
        # The opener is a closure of the reader: workers open the file from its path instead.
        portable = replace(source, opener=_unopenable)
        return self._pool.apply_async(_scan, (portable, span, seed, give_seed, guess), callback=done)

    def close(self, *, abandon: bool = False) -> None:
        """Let the workers finish and exit (`abandon`: stop them now, after a failure)."""
        if abandon:
            self._pool.terminate()
        else:
            self._pool.close()
        self._pool.join()


def _start(catalog: Catalog, limits: ReadLimits, budget: RegexBudget) -> None:
    global _job
    _job = (catalog, limits, budget)


def _scan(source: Source, span: Span | None, seed: Seed | None, give_seed: bool, guess: bool) -> Piece:
    if _job is None:  # pragma: no cover - the initializer always ran
        raise RuntimeError("scan worker was not started")
    catalog, limits, budget = _job
    whole = Span(0, None, 0)  # a whole plain file, read from its path
    return scan_piece(
        source,
        catalog,
        prefilter_for(catalog),
        limits,
        budget,
        span=span or whole,
        seed=seed,
        give_seed=give_seed,
        guess=guess,
        read_ahead=False,  # the workers keep the cores busy: a read-ahead thread would only add switches
    )


def _unopenable() -> BinaryIO:
    raise RuntimeError("a worker reads a plain file from its path, never through the reader's opener")
