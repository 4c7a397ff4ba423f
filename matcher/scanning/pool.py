"""Worker processes for the scanner: pieces of plain files scanned on every core.

A plain file on disk can be read by another process from its path (`Source.path`), so the scanner hands
such files, and the spans of large ones, to worker processes while it goes on with the rest (archive
members, compressed files, stdin) itself. Workers are forked from the scanning process, so they start in
milliseconds with its catalog and compiled Hyperscan databases already in memory; a process that runs
other threads (a server) gets workers from a fork server instead, since forking a threaded process is
unsafe. Each worker holds one piece at a time (a block of about 1 MiB and that piece's observations), so
memory per worker stays bounded; the regex budget is shared memory (`matcher.scanning.regex_budget`), one
for the whole diagnosis.

Each worker has one pipe, and this process talks to all of them from the thread that scans: no helper
threads (`multiprocessing.Pool`'s three cost a tenth of a second of CPU per thousand files, one of them
polling its result pipe while results wait). A worker holds at most `IN_FLIGHT` tasks, so the next one
is already there when it finishes; a task larger than the pipe holds goes only to an idle worker, and a
worker reads its waiting tasks before it sends a result, so neither side can block the other for long.
Results are taken in whenever this process waits for one, and between the sources it reads.

`NCCLBOT_WORKERS` sets the number of workers (default: the cores this process may run on, at most
MAX_WORKERS; 1 scans everything in-process).
"""

from __future__ import annotations

import collections
import gc
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.context import BaseContext
from typing import Any, BinaryIO

from matcher.model import InputError
from matcher.reading.read import ReadLimits, Source, Span
from matcher.scanning.catalog import Catalog
from matcher.scanning.prefilter import prefilter_for
from matcher.scanning.regex_budget import RegexBudget
from matcher.scanning.source_scan import Piece, Seed, scan_piece

ENV_WORKERS = "NCCLBOT_WORKERS"
MAX_WORKERS = 8
# Tasks a worker holds at once (the one it scans and the next), and the largest task sent to a busy
# worker: two such fit in a pipe's buffer (64 KiB on Linux), so a send never waits for a busy worker.
IN_FLIGHT = 2
SMALL_TASK_BYTES = 16 * 1024

# Set in each worker process: what every piece of one diagnosis is scanned with.
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


@dataclass(eq=False)
class Pending:
    """A piece being scanned by a worker: `get()` waits for it (taking in other results meanwhile)."""

    workers: Workers
    message: bytes
    done: Callable[[Piece], None] | None
    piece: Piece | None = None
    error: BaseException | None = None
    finished: bool = False

    def get(self) -> Piece:
        while not self.finished:
            self.workers.collect(block=True)
        if self.error is not None:
            raise self.error
        assert self.piece is not None
        return self.piece


@dataclass(eq=False)
class _Worker:
    process: Any  # a multiprocessing Process of the pool's context
    connection: Connection
    tasks: collections.deque[Pending] = field(default_factory=collections.deque)


class Workers:
    """The scanning processes of one diagnosis (`context`: `process_context()`, or the one the shared
    regex budget was made for)."""

    def __init__(
        self, count: int, catalog: Catalog, limits: ReadLimits, budget: RegexBudget, context: BaseContext
    ) -> None:
        self._waiting: collections.deque[Pending] = collections.deque()  # not yet sent
        self._workers: list[_Worker] = []
        forking = context.get_start_method() == "fork"
        if forking:
            # What the workers inherit (catalog, compiled patterns, modules) is never garbage: frozen, the
            # collector in each worker neither walks it nor touches (and so copies) its pages. This
            # process thaws it again once the workers are forked.
            gc.freeze()
        try:
            for _ in range(count):
                mine, theirs = context.Pipe(duplex=True)
                process = context.Process(  # type: ignore[attr-defined]
                    target=_serve, args=(theirs, catalog, limits, budget), daemon=True
                )
                process.start()
                theirs.close()
                self._workers.append(_Worker(process, mine))
        except BaseException:
            self.close(abandon=True)
            raise
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
    ) -> Pending:
        # The opener is a closure of the reader: workers open the file from its path instead.
        portable = replace(source, opener=_unopenable)
        message = pickle.dumps((portable, span, seed, give_seed, guess), pickle.HIGHEST_PROTOCOL)
        pending = Pending(self, message, done)
        self._waiting.append(pending)
        self.collect(block=False)
        return pending

    def collect(self, *, block: bool) -> None:
        """Take in the results that are there (`block`: wait for at least one), and hand out waiting
        tasks to the workers that have room."""
        self._dispatch()
        busy = {worker.connection: worker for worker in self._workers if worker.tasks}
        if not busy:
            return
        for ready in wait(list(busy), None if block else 0):
            worker = busy[ready]  # type: ignore[index]
            try:
                ok, value = pickle.loads(worker.connection.recv_bytes())
            except (EOFError, OSError):
                raise RuntimeError("a scan worker process died") from None
            pending = worker.tasks.popleft()
            pending.finished = True
            if ok:
                pending.piece = value
                if pending.done is not None:
                    pending.done(value)
            else:
                pending.error = value
        self._dispatch()

    def _dispatch(self) -> None:
        while self._waiting:
            pending = self._waiting[0]
            small = len(pending.message) <= SMALL_TASK_BYTES
            room = [w for w in self._workers if len(w.tasks) < (IN_FLIGHT if small else 1)]
            if not room:
                return
            worker = min(room, key=lambda w: len(w.tasks))
            self._waiting.popleft()
            worker.connection.send_bytes(pending.message)
            worker.tasks.append(pending)

    def close(self, *, abandon: bool = False) -> None:
        """Let the workers finish and exit (`abandon`: stop them now, after a failure)."""
        for worker in self._workers:
            if abandon:
                worker.process.terminate()
            else:
                try:
                    worker.connection.send_bytes(b"")  # no more tasks
                except OSError:
                    worker.process.terminate()
        for worker in self._workers:
            worker.process.join()
            worker.connection.close()
        self._workers = []


def _serve(connection: Connection, catalog: Catalog, limits: ReadLimits, budget: RegexBudget) -> None:
    """A worker process: scan the tasks that come in until an empty message says there are no more.
    Tasks that came in meanwhile are read before a result goes out (see the module note)."""
    global _job
    _job = (catalog, limits, budget)
    _keep_freed_blocks()
    inbox: collections.deque[bytes] = collections.deque()
    while True:
        message = inbox.popleft() if inbox else connection.recv_bytes()
        if not message:
            return
        task = pickle.loads(message)
        try:
            result: tuple[bool, object] = (True, _scan(*task))
        except Exception as error:  # an InputError of a file, say: the scanner raises it in order
            result = (False, error)
        while connection.poll():
            inbox.append(connection.recv_bytes())
        connection.send_bytes(pickle.dumps(result, pickle.HIGHEST_PROTOCOL))


# glibc's malloc serves the ~1 MiB blocks a scan allocates and frees over and over from fresh mappings
# whenever its adaptive thresholds lag behind them (blocks vary in size), so every block costs 256 page
# faults: about a sixth of a worker's time per byte. A worker is a short-lived process of its own, so it
# keeps freed memory up to these sizes instead.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_ABOVE_BYTES = 8 * 1024**2
_TRIM_ABOVE_BYTES = 32 * 1024**2


def _keep_freed_blocks() -> None:
    import ctypes  # only here: a worker's first moments, not every start-up

    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc: its allocator, its business
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_ABOVE_BYTES)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_ABOVE_BYTES)


def _scan(source: Source, span: Span | None, seed: Seed | None, give_seed: bool, guess: bool) -> Piece:
    if _job is None:  # pragma: no cover - set before the first task
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
