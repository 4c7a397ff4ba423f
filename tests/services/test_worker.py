"""Queue workers: failures are retried until they succeed, a crash between posting and recording never
posts twice, one group's posts keep their order through an outage, hopeless items stop, and an item
whose lease a late heartbeat let run out is not run a second time by the same worker."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from bot.services.outlet import InMemoryOutlet, Message, MessageRef
from bot.services.posting import post_once
from bot.services.worker import Backoff, PermanentError, QueueWorker
from bot.store import Store
from bot.store.queue import QueuedItem, WorkQueue

FAST = Backoff(first=0.01, factor=1.0, cap=0.01, jitter=0.0)


def drain(worker: QueueWorker, *, rounds: int = 200) -> None:
    """Run the worker inline until the queue has nothing due (bounded; sleeps through short backoffs)."""
    for _ in range(rounds):
        if not worker.run_once():
            time.sleep(0.02)
            if not worker.run_once():
                return


class FlakyOutlet(InMemoryOutlet):
    """Slack during an outage: the first `failures` posts raise."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def post(
        self, channel: str, message: Message, *, thread: MessageRef | None = None, key: str | None = None
    ) -> MessageRef:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("Slack answered 503")
        return super().post(channel, message, thread=thread, key=None)  # no lookup by key: like a plain API


def test_a_crash_after_posting_does_not_post_twice(store: Store) -> None:
    outlet = FlakyOutlet(failures=0)
    queue = WorkQueue(store)
    crashed = []

    def handle(item: QueuedItem) -> None:
        post_once(outlet, store, f"{item.key}:top", "C1", Message(text=item.payload["text"]))
        if not crashed:
            crashed.append(item.id)
            raise RuntimeError("killed between the post and its bookkeeping")

    queue.enqueue("job-failed", "c1/1/0", {"text": "cuda/oom on gpu-node-02"})
    drain(QueueWorker(queue, {"job-failed": handle}, backoff=FAST))
    assert [p.message.text for p in outlet.posted] == ["cuda/oom on gpu-node-02"]
    assert queue.items()[0].status == "done"


def test_posts_of_one_incident_land_in_order_after_an_outage(store: Store) -> None:
    outlet = FlakyOutlet(failures=5)
    queue = WorkQueue(store, max_attempts=20)

    def handle(item: QueuedItem) -> None:
        post_once(outlet, store, item.key, "C1", Message(text=item.key))

    for name in ("first", "second", "third"):
        queue.enqueue("slack.post", name, {}, group="incident-1")
    drain(QueueWorker(queue, {"slack.post": handle}, backoff=FAST))
    assert [p.message.text for p in outlet.posted] == ["first", "second", "third"]


def test_a_permanent_failure_is_not_retried(store: Store) -> None:
    queue = WorkQueue(store)
    calls = []

    def handle(item: QueuedItem) -> None:
        calls.append(item.id)
        raise PermanentError("payload names no job")

    queue.enqueue("job-failed", "bad", {})
    drain(QueueWorker(queue, {"job-failed": handle}, backoff=FAST))
    assert len(calls) == 1 and queue.items()[0].status == "dead"
    assert queue.items()[0].last_error == "payload names no job"


def test_started_workers_process_items_in_the_background_and_stop(store: Store) -> None:
    queue = WorkQueue(store)
    seen = threading.Event()
    worker = QueueWorker(queue, {"job-failed": lambda item: seen.set()}, threads=2, poll_interval=0.05)
    worker.start()
    threads = list(worker._threads)
    try:
        queue.enqueue("job-failed", "k", {})
        worker.wake()
        assert seen.wait(10)
    finally:
        worker.stop()
    assert len(threads) == 3 and not any(thread.is_alive() for thread in threads)


def test_an_item_outliving_its_lease_between_heartbeats_runs_once(store: Store) -> None:
    # The lease (0.2 s) runs out before each heartbeat (every 0.5 s): what a loaded machine does to a
    # lease of a few seconds. The worker's idle thread must not take over its busy thread's item.
    queue = WorkQueue(store)
    runs: list[int] = []
    done = threading.Event()

    def slow(item: QueuedItem) -> None:
        runs.append(item.attempts)
        time.sleep(1.5)
        done.set()

    worker = QueueWorker(
        queue, {"job-failed": slow}, threads=2, lease=timedelta(seconds=0.2), poll_interval=0.05
    )
    item_id = queue.enqueue("job-failed", "k", {}).id
    worker.start()
    try:
        assert done.wait(10)
        time.sleep(0.3)
    finally:
        worker.stop()
    assert runs == [1]
    assert queue.get(item_id).status == "done"


def test_backoff_grows_and_is_capped() -> None:
    backoff = Backoff(first=2, factor=2, cap=60, jitter=0)
    assert [backoff.delay(n) for n in (1, 2, 3, 10)] == [
        timedelta(seconds=2),
        timedelta(seconds=4),
        timedelta(seconds=8),
        timedelta(seconds=60),
    ]
