"""Scanning processes: pieces of plain files scanned on every core, by worker processes and this one.

A plain file on disk can be read by another process from its path (`Source.path`), so the scanner hands
such files, and the spans of large ones, to `Workers`: one worker process per core but one, and this
process itself, which scans waiting pieces whenever it waits for a result rather than sit idle (and the rest:
archive members, compressed files, stdin). A piece whose observations are many (the first span of a
large file, where every process announces itself) is scanned here, where they are needed, not pickled
twice. Workers are forked from the scanning process, so they start in milliseconds with its catalog and
compiled Hyperscan databases already in memory; a process that runs other threads (a server) gets
workers from a fork server instead, since forking a threaded process is unsafe. Each process holds one
piece at a time (a block of about 1 MiB and that piece's observations), so memory per process stays
bounded; the regex budget is shared memory (`matcher.scanning.regex_budget`), one for the whole diagnosis.

Each worker has one pipe, and this process talks to all of them from the thread that scans: no helper
threads (`multiprocessing.Pool`'s three cost a tenth of a second of CPU per thousand files, one of them
polling its result pipe while results wait). A worker holds at most `IN_FLIGHT` tasks, so the next one
is already there when it finishes; a task larger than the pipe holds goes only to an idle worker, and a
worker reads its waiting tasks before it sends a result, so neither side can block the other for long.
Results are taken in, and tasks handed out, between the sources this process reads and between the
blocks it scans (and the regions of a block: one of set-up lines takes a tenth of a second).

`NCCLBOT_WORKERS` sets the number of processes that scan, this one included (default: the cores this
process may run on, at most MAX_WORKERS; 1 scans everything in-process). This process counts as one since
it scans as much as a worker: a worker per core besides it would put three processes on two cores, each
at two thirds of one, the first span of a large file (scanned here) the longest of them.
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
            raise InputError(f"{ENV_WORKERS}={value!r} is not a number of scanning processes") from None
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
    """A piece to be scanned, here or by a worker: `get()` waits for it, scanning waiting pieces here
    meanwhile."""

    workers: Workers
    task: tuple[Source, Span | None, Seed | None, bool, bool]
    done: Callable[[Piece], None] | None
    piece: Piece | None = None
    error: BaseException | None = None
    finished: bool = False
    queued: bool = True  # not handed to a worker or taken up here yet
    message: bytes | None = None  # the task pickled for a worker, once it was

    def get(self) -> Piece:
        while not self.finished:
            self.workers.step(self)
        if self.error is not None:
            raise self.error
        assert self.piece is not None
        return self.piece

    def finish(self, piece: Piece | None, error: BaseException | None) -> None:
        self.finished, self.piece, self.error = True, piece, error
        if piece is not None and self.done is not None:
            self.done(piece)


@dataclass(eq=False)
class _Worker:
    process: Any  # a multiprocessing Process of the pool's context
    connection: Connection
    tasks: collections.deque[Pending] = field(default_factory=collections.deque)


class Workers:
    """The `processes` that scan the pieces of one diagnosis: this one, which scans waiting pieces
    whenever it waits for a result, and `processes - 1` workers (at least one; `context`:
    `process_context()`, or the one the shared regex budget was made for)."""

    def __init__(
        self, processes: int, catalog: Catalog, limits: ReadLimits, budget: RegexBudget, context: BaseContext
    ) -> None:
        self._job = (catalog, limits, budget)
        self._waiting: collections.deque[Pending] = collections.deque()  # for any process
        self._here: collections.deque[Pending] = collections.deque()  # for this one
        self._workers: list[_Worker] = []
        _keep_freed_blocks()  # this process scans pieces too (and forked workers inherit the setting)
        forking = context.get_start_method() == "fork"
        if forking:
            # What the workers inherit (catalog, compiled patterns, modules) is never garbage: frozen, the
            # collector in each worker neither walks it nor touches (and so copies) its pages. This
            # process thaws it again once the workers are forked.
            gc.freeze()
        try:
            for _ in range(max(processes - 1, 1)):
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
        here: bool = False,
    ) -> Pending:
        """A piece to scan (`here`: in this process, when it waits for it: a piece whose observations
        are many, such as the first span of a large file, is cheaper scanned than sent)."""
        # The opener is a closure of the reader: a worker opens the file from its path instead.
        portable = replace(source, opener=_unopenable)
        pending = Pending(self, (portable, span, seed, give_seed, guess), done)
        (self._here if here else self._waiting).append(pending)
        self.collect(block=False)
        return pending

    def step(self, wanted: Pending) -> None:
        """One step towards `wanted`'s result: take in what the workers sent, then scan a waiting piece
        here (`wanted` itself while it waits) rather than sit idle; else wait for a worker."""
        self.collect(block=False)
        if wanted.finished:
            return
        for queue in (self._here, self._waiting):
            if wanted.queued and wanted in queue:
                queue.remove(wanted)
                self._run_here(wanted)
                return
        for queue in (self._here, self._waiting):
            if queue:
                self._run_here(queue.popleft())
                return
        self.collect(block=True)

    def collect(self, *, block: bool) -> None:
        """Take in the results that are there (`block`: wait for at least one), and hand out waiting
        pieces to the workers that have room."""
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
            worker.tasks.popleft().finish(value if ok else None, None if ok else value)
        self._dispatch()

    def _dispatch(self) -> None:
        while self._waiting:
            room = [w for w in self._workers if len(w.tasks) < IN_FLIGHT]
            if not room:
                return
            pending = self._waiting[0]
            if pending.message is None:
                pending.message = pickle.dumps(pending.task, pickle.HIGHEST_PROTOCOL)
            message = pending.message
            if len(message) > SMALL_TASK_BYTES:
                room = [w for w in room if not w.tasks]
                if not room:
                    return
            worker = min(room, key=lambda w: len(w.tasks))
            self._waiting.popleft()
            pending.queued = False
            worker.connection.send_bytes(message)
            worker.tasks.append(pending)

    def _run_here(self, pending: Pending) -> None:
        pending.queued = False
        catalog, limits, budget = self._job
        try:
            piece = _scan_piece(*pending.task, catalog, limits, budget, between=self._between)
        except Exception as error:  # raised where the scanner asks for this piece, as a worker's would be
            pending.finish(None, error)
        else:
            pending.finish(piece, None)

    def _between(self) -> None:
        """Between the blocks (and regions) of a piece scanned here: the workers' results taken in, new
        pieces handed out (else they would sit idle until this piece is done)."""
        self.collect(block=False)

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
# faults: about a sixth of a worker's time per byte (and a third of this process's, which scans pieces
# beside them). Workers are short-lived processes, so they keep freed memory up to these sizes instead;
# so does this process once a diagnosis is large enough to start them (in a server: at most
# _TRIM_ABOVE_BYTES of freed heap kept for the next diagnosis, whose blocks reuse it).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_ABOVE_BYTES = 8 * 1024**2
_TRIM_ABOVE_BYTES = 32 * 1024**2
_kept_freed_blocks = False  # set once per process (a forked worker inherits it with the setting)


def _keep_freed_blocks() -> None:
    global _kept_freed_blocks
    if _kept_freed_blocks:
        return
    _kept_freed_blocks = True
    import ctypes  # only here: the first large diagnosis, not every start-up

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
    return _scan_piece(source, span, seed, give_seed, guess, *_job)


def _scan_piece(
    source: Source,
    span: Span | None,
    seed: Seed | None,
    give_seed: bool,
    guess: bool,
    catalog: Catalog,
    limits: ReadLimits,
    budget: RegexBudget,
    between: Callable[[], None] | None = None,
) -> Piece:
    """`between`: called between the blocks and the regions of the piece (see `scan_piece`'s `tick`)."""
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
        read_ahead=False,  # the cores are busy: a read-ahead thread would only add switches
        progress=None if between is None else lambda _size: between(),
        tick=between,
    )


def _unopenable() -> BinaryIO:
    raise RuntimeError("a worker reads a plain file from its path, never through the reader's opener")
