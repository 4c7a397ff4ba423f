"""The durable work queue on SQLite and PostgreSQL: idempotent accept, claims with leases, takeover of a
dead worker's items, retries, poison items, per-group order, and many claimers without double claims."""

from __future__ import annotations

import multiprocessing
from datetime import timedelta

import pytest

from bot.store import Store
from bot.store.queue import WorkQueue
from tests.store.conftest import T0

LEASE = timedelta(minutes=5)


@pytest.fixture
def queue(store: Store) -> WorkQueue:
    return WorkQueue(store, max_attempts=3)


def test_the_same_kind_and_key_is_accepted_once(queue: WorkQueue) -> None:
    first = queue.enqueue("job-failed", "c1/42/0", {"job_id": "42"}, now=T0)
    again = queue.enqueue("job-failed", "c1/42/0", {"job_id": "42", "resent": True}, now=T0)
    other_kind = queue.enqueue("slack.diagnose", "c1/42/0", {}, now=T0)
    assert first.created and not again.created and again.id == first.id
    assert other_kind.created
    assert queue.get(first.id).payload == {"job_id": "42"}


def test_items_are_claimed_oldest_first_and_only_once(queue: WorkQueue) -> None:
    ids = [queue.enqueue("job-failed", f"k{i}", {}, now=T0).id for i in range(3)]
    claimed = [queue.claim("w1", lease=LEASE, now=T0) for _ in range(4)]
    assert [item.id for item in claimed if item] == ids
    assert claimed[-1] is None
    assert all(item.attempts == 1 and item.claimed_by == "w1" for item in claimed if item)


def test_claims_filter_by_kind(queue: WorkQueue) -> None:
    queue.enqueue("digest", "w49", {}, now=T0)
    wanted = queue.enqueue("job-failed", "k", {}, now=T0)
    item = queue.claim("w1", kinds=["job-failed"], now=T0)
    assert item is not None and item.id == wanted.id
    assert queue.claim("w1", kinds=["job-failed"], now=T0) is None


def test_a_dead_workers_item_is_taken_over_after_its_lease(queue: WorkQueue) -> None:
    item_id = queue.enqueue("job-failed", "k", {}, now=T0).id
    assert queue.claim("dead-worker", lease=LEASE, now=T0) is not None
    assert queue.claim("w2", lease=LEASE, now=T0 + LEASE - timedelta(seconds=1)) is None
    taken = queue.claim("w2", lease=LEASE, now=T0 + LEASE + timedelta(seconds=1))
    assert taken is not None and taken.id == item_id and taken.attempts == 2
    assert not queue.complete(item_id, "dead-worker", now=T0 + LEASE * 2)  # it lost the item
    assert queue.complete(item_id, "w2", {"posted": "1.2"}, now=T0 + LEASE * 2)
    done = queue.get(item_id)
    assert done.status == "done" and done.result == {"posted": "1.2"}


def test_an_item_its_worker_still_works_on_is_not_handed_to_it_again(queue: WorkQueue) -> None:
    item_id = queue.enqueue("job-failed", "k", {}, now=T0).id
    assert queue.claim("w1", lease=LEASE, now=T0) is not None
    late = T0 + LEASE + timedelta(seconds=1)  # its heartbeat was late: the lease ran out
    assert queue.claim("w1", lease=LEASE, busy={item_id}, now=late) is None
    assert queue.get(item_id).attempts == 1
    assert queue.heartbeat(item_id, "w1", lease=LEASE, now=late)  # the late heartbeat renews it
    assert queue.claim("w2", lease=LEASE, now=late + timedelta(seconds=1)) is None
    assert queue.complete(item_id, "w1", now=late + timedelta(seconds=2))


def test_an_item_its_worker_dropped_is_taken_over_by_that_worker(queue: WorkQueue) -> None:
    # Its retry could not be recorded (the database was down): still running, held by nobody.
    item_id = queue.enqueue("job-failed", "k", {}, now=T0).id
    assert queue.claim("w1", lease=LEASE, now=T0) is not None
    again = queue.claim("w1", lease=LEASE, busy=(), now=T0 + LEASE + timedelta(seconds=1))
    assert again is not None and again.id == item_id and again.attempts == 2


def test_a_heartbeat_keeps_the_lease(queue: WorkQueue) -> None:
    queue.enqueue("job-failed", "k", {}, now=T0)
    item = queue.claim("w1", lease=LEASE, now=T0)
    assert item is not None
    assert queue.heartbeat(item.id, "w1", lease=LEASE, now=T0 + LEASE - timedelta(seconds=10))
    assert queue.claim("w2", lease=LEASE, now=T0 + LEASE + timedelta(seconds=1)) is None


def test_a_retried_item_waits_for_its_delay(queue: WorkQueue) -> None:
    queue.enqueue("job-failed", "k", {}, now=T0)
    item = queue.claim("w1", now=T0)
    assert item is not None
    assert queue.retry(item.id, "w1", "Slack answered 500", delay=timedelta(seconds=30), now=T0)
    assert queue.claim("w1", now=T0 + timedelta(seconds=29)) is None
    again = queue.claim("w1", now=T0 + timedelta(seconds=31))
    assert again is not None and again.attempts == 2 and again.last_error == "Slack answered 500"


def test_items_that_keep_failing_end_dead_and_are_counted(queue: WorkQueue) -> None:
    item_id = queue.enqueue("job-failed", "k", {}, now=T0).id
    for attempt in range(3):
        item = queue.claim("w1", now=T0 + timedelta(hours=attempt))
        assert item is not None
        queue.retry(item_id, "w1", "boom", delay=timedelta(0), now=T0 + timedelta(hours=attempt))
    assert queue.get(item_id).status == "dead"
    assert queue.claim("w1", now=T0 + timedelta(days=1)) is None
    assert queue.stats(now=T0).dead == 1


def test_an_item_whose_workers_keep_dying_is_given_up(queue: WorkQueue) -> None:
    item_id = queue.enqueue("job-failed", "poison", {}, now=T0).id
    at = T0
    for _ in range(3):
        assert queue.claim("w", lease=LEASE, now=at) is not None
        at += LEASE + timedelta(seconds=1)
    assert queue.claim("w", lease=LEASE, now=at) is None
    assert queue.get(item_id).status == "dead"


def test_a_permanent_failure_is_dead_at_once(queue: WorkQueue) -> None:
    item_id = queue.enqueue("job-failed", "k", {}, now=T0).id
    assert queue.claim("w1", now=T0) is not None
    queue.retry(item_id, "w1", "unknown cluster", delay=timedelta(0), permanent=True, now=T0)
    assert queue.get(item_id).status == "dead"


def test_a_group_runs_one_item_at_a_time_in_order(queue: WorkQueue) -> None:
    first = queue.enqueue("slack.post", "a", {}, group="incident-7", now=T0).id
    second = queue.enqueue("slack.post", "b", {}, group="incident-7", now=T0).id
    other = queue.enqueue("slack.post", "c", {}, group="incident-8", now=T0).id
    claimed = queue.claim("w1", now=T0)
    assert claimed is not None and claimed.id == first
    parallel = queue.claim("w2", now=T0)
    assert parallel is not None and parallel.id == other  # not `second`: its group is busy
    queue.retry(first, "w1", "429", delay=timedelta(seconds=60), now=T0)
    assert queue.claim("w2", now=T0 + timedelta(seconds=1)) is None  # `second` still waits for `first`
    retried = queue.claim("w1", now=T0 + timedelta(seconds=61))
    assert retried is not None and retried.id == first
    queue.complete(first, "w1", now=T0 + timedelta(seconds=62))
    last = queue.claim("w1", now=T0 + timedelta(seconds=62))
    assert last is not None and last.id == second


def test_stats_show_depth_by_kind_and_the_oldest_pending_age(queue: WorkQueue) -> None:
    queue.enqueue("job-failed", "a", {}, now=T0)
    queue.enqueue("job-failed", "b", {}, now=T0 + timedelta(seconds=30))
    queue.enqueue("slack.diagnose", "c", {}, now=T0 + timedelta(seconds=60))
    queue.claim("w1", now=T0 + timedelta(seconds=90))
    stats = queue.stats(now=T0 + timedelta(seconds=100))
    assert stats.waiting_by_kind == {"job-failed": 2, "slack.diagnose": 1}
    assert stats.running == 1
    assert stats.oldest_pending_age_s == pytest.approx(70)


def _claim_all(url: str, worker: str, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    with Store.open(url) as opened:
        queue = WorkQueue(opened)
        claimed = []
        while (item := queue.claim(worker)) is not None:
            claimed.append(item.id)
            queue.complete(item.id, worker)
        results.put(claimed)


def test_concurrent_workers_in_separate_processes_never_claim_one_item_twice(database_url: str) -> None:
    with Store.open(database_url) as opened:
        queue = WorkQueue(opened)
        ids = {queue.enqueue("job-failed", f"k{i}", {}).id for i in range(60)}
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers = [context.Process(target=_claim_all, args=(database_url, f"w{i}", results)) for i in range(4)]
    for process in workers:
        process.start()
    claimed = [results.get(timeout=120) for _ in workers]
    for process in workers:
        process.join(timeout=60)
    every = [item for batch in claimed for item in batch]
    assert sorted(every) == sorted(ids)  # each item exactly once
