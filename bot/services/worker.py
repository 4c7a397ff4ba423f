"""Background workers that drain the durable work queue (bot.store.queue).

A handler per item kind does the work; a handler that raises is retried with exponential backoff (a
Slack or database outage delays work but loses none), and one that raises `PermanentError` is given up
at once (the item can never succeed: say why in the error). Long items keep their lease alive with a
heartbeat, so that only a dead worker's items are taken over.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot import logs
from bot.store.queue import DEFAULT_LEASE, QueuedItem, WorkQueue

log = logging.getLogger("ncclbot.worker")

Handler = Callable[[QueuedItem], dict[str, Any] | None]


class PermanentError(Exception):
    """The item cannot succeed however often it is tried (bad payload, unknown job)."""


def is_outage(error: BaseException) -> bool:
    """A dependency is down, not the item at fault (retried however long it takes, without using up its
    attempts): an HTTP API answering 429 or 5xx (Slack's client errors carry the response), a connection
    that fails, a database that cannot be reached."""
    from sqlalchemy.exc import InterfaceError, OperationalError

    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(status, int):
        return status == 429 or status >= 500
    return isinstance(error, (OSError, OperationalError, InterfaceError))


@dataclass(frozen=True, slots=True)
class Backoff:
    first: float = 2.0
    factor: float = 2.0
    cap: float = 300.0
    jitter: float = 0.2

    def delay(self, attempts: int) -> timedelta:
        seconds = min(self.cap, self.first * self.factor ** max(0, attempts - 1))
        return timedelta(seconds=seconds * (1 + random.uniform(-self.jitter, self.jitter)))

    def outage_delay(self, waiting: timedelta) -> timedelta:
        """During an outage an item's attempts do not grow, so the pause grows with how long it has
        waited: a quarter of that, between `first` and `cap` (a long outage is polled gently)."""
        seconds = min(self.cap, max(self.first, waiting.total_seconds() / 4))
        return timedelta(seconds=seconds * (1 + random.uniform(-self.jitter, self.jitter)))


def worker_id() -> str:
    """Unique per process and start: host, pid and a random suffix (a restarted pid is another worker)."""
    return f"{socket.gethostname()}:{os.getpid()}:{random.getrandbits(32):08x}"


class QueueWorker:
    """`threads` loops that claim and handle items of the handled kinds until stopped."""

    name = "queue-worker"

    def __init__(
        self,
        queue: WorkQueue,
        handlers: Mapping[str, Handler],
        *,
        threads: int = 2,
        lease: timedelta = DEFAULT_LEASE,
        poll_interval: float = 0.5,
        backoff: Backoff | None = None,
        identity: str | None = None,
        outage: Callable[[Exception], bool] | None = None,
    ) -> None:
        self.queue = queue
        self.handlers = dict(handlers)
        self.threads = threads
        self.lease = lease
        self.poll_interval = poll_interval
        self.backoff = backoff or Backoff()
        self.identity = identity or worker_id()
        # Failures that are nobody's fault but a dependency's (Slack or the database down): retried
        # without using up the item's attempts.
        self.outage = outage or (lambda _error: False)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._held: set[int] = set()
        self._held_lock = threading.Lock()

    def start(self) -> None:
        self._stop.clear()
        for index in range(self.threads):
            thread = threading.Thread(target=self._loop, name=f"{self.name}-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)
        beat = threading.Thread(target=self._heartbeat_loop, name=f"{self.name}-heartbeat", daemon=True)
        beat.start()
        self._threads.append(beat)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()

    def wake(self) -> None:
        """New work was enqueued: look now instead of at the next poll."""
        self._wake.set()

    def run_once(self) -> bool:
        """Claim and handle one item; False when there was nothing to do."""
        # Not the items this worker's other threads are on, even with a lease a late heartbeat let run
        # out. (An item joins `_held` while its lease is fresh, so the snapshot misses none that expired.)
        with self._held_lock:
            busy = frozenset(self._held)
        item = self.queue.claim(self.identity, kinds=list(self.handlers), lease=self.lease, busy=busy)
        if item is None:
            return False
        with self._held_lock:
            self._held.add(item.id)
        try:
            self._handle(item)
        finally:
            with self._held_lock:
                self._held.discard(item.id)
        return True

    def _handle(self, item: QueuedItem) -> None:
        # Every line logged while handling the item carries the id of the request that queued it.
        with logs.request_scope(item.request_id or f"item-{item.id}"):
            self._handle_in_scope(item)

    def _handle_in_scope(self, item: QueuedItem) -> None:
        handler = self.handlers[item.kind]
        started = time.monotonic()
        try:
            result = handler(item)
        except PermanentError as error:
            log.error("work item %s (%s %s) given up: %s", item.id, item.kind, item.key, error)
            self.queue.retry(item.id, self.identity, str(error), delay=timedelta(0), permanent=True)
            return
        except Exception as error:  # any failure is retried later; the item is never dropped
            outage = self.outage(error)
            waited = datetime.now(UTC) - item.created_at.replace(tzinfo=item.created_at.tzinfo or UTC)
            delay = self.backoff.outage_delay(waited) if outage else self.backoff.delay(item.attempts)
            log.warning(
                "work item %s (%s %s) failed (%s), retrying in %.0f s: %s",
                item.id,
                item.kind,
                item.key,
                "an outage" if outage else f"attempt {item.attempts}",
                delay.total_seconds(),
                error,
            )
            self.queue.retry(
                item.id,
                self.identity,
                f"{type(error).__name__}: {error}",
                delay=delay,
                consume_attempt=not outage,
            )
            return
        if not self.queue.complete(item.id, self.identity, result):
            log.warning("work item %s finished after its lease was taken over", item.id)
            return
        seconds = time.monotonic() - started
        log.info(
            "work item %s (%s %s) done in %.2f s",
            item.id,
            item.kind,
            item.key,
            seconds,
            extra={"work_item": item.id, "kind": item.kind, "duration_ms": round(seconds * 1000, 1)},
        )

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.run_once()
            except Exception:  # the database is down: keep trying, never die
                log.exception("claiming work failed; retrying")
                busy = False
                self._stop.wait(min(5.0, self.poll_interval * 4))
            if not busy:
                self._wake.wait(self.poll_interval)
                self._wake.clear()

    def _heartbeat_loop(self) -> None:
        interval = max(0.5, self.lease.total_seconds() / 3)
        while not self._stop.wait(interval):
            with self._held_lock:
                held = list(self._held)
            for item_id in held:
                try:
                    self.queue.heartbeat(item_id, self.identity, lease=self.lease)
                except Exception:
                    log.exception("heartbeat for work item %s failed", item_id)
