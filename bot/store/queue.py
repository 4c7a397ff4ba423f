"""A durable work queue in the incident store's database.

Accepted work (a failed job's webhook, a Slack upload to diagnose) is committed here before the sender
is told "accepted", and workers claim rows to process them. Nothing is lost on a crash: a claim carries
a lease, and a claim whose lease ran out (its worker died) is taken over by the next claim. On
PostgreSQL several replicas share the queue (`FOR UPDATE SKIP LOCKED`); on SQLite the write lock taken
at BEGIN serialises claims. Work sharing a `group_key` (one incident's posts) runs one item at a time,
oldest first, so retries never reorder it. Posting exactly once is the handlers' job, with
`Store.message_for_key` / `remember_message` (bot.services.posting), since a worker can die after its
side effect and before `complete`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, or_, select, update
from sqlalchemy.orm import aliased

from bot import logs
from bot.store.engine import StoreError, conflict_insert
from bot.store.models import (
    QUEUE_DEAD,
    QUEUE_DONE,
    QUEUE_PENDING,
    QUEUE_RUNNING,
    WorkItem,
)
from bot.store.store import Store, remember_processed

DEFAULT_LEASE = timedelta(minutes=10)
# The enqueuing request's id rides in the stored payload under this key; handlers get it as
# `QueuedItem.request_id`, never inside their payload.
REQUEST_ID_KEY = "_request_id"
DEFAULT_MAX_ATTEMPTS = 8
ERROR_TEXT_LIMIT = 2000


@dataclass(frozen=True, slots=True)
class QueuedItem:
    """A work item as handed to a worker (plain data, detached from the database)."""

    id: int
    kind: str
    key: str
    group_key: str | None
    payload: dict[str, Any]
    status: str
    attempts: int
    created_at: datetime
    claimed_by: str | None
    last_error: str | None
    result: dict[str, Any] | None
    request_id: str | None = None  # of the request that enqueued it: its log lines share the id


@dataclass(frozen=True, slots=True)
class Enqueued:
    id: int
    created: bool  # False: the same (kind, key) was accepted before; nothing new was queued


@dataclass(frozen=True, slots=True)
class QueueStats:
    waiting_by_kind: dict[str, int]  # pending + running
    running: int
    dead: int
    oldest_pending_age_s: float | None


def _now(now: datetime | None) -> datetime:
    moment = now or datetime.now(UTC)
    if moment.tzinfo is None:
        raise StoreError("times given to the queue must carry a time zone")
    return moment.astimezone(UTC)


def _plain(row: WorkItem) -> QueuedItem:
    return QueuedItem(
        id=row.id,
        kind=row.kind,
        key=row.key,
        group_key=row.group_key,
        payload={key: value for key, value in row.payload.items() if key != REQUEST_ID_KEY},
        status=row.status,
        attempts=row.attempts,
        created_at=row.created_at,
        claimed_by=row.claimed_by,
        last_error=row.last_error,
        result=row.result,
        request_id=row.payload.get(REQUEST_ID_KEY),
    )


class WorkQueue:
    def __init__(self, store: Store, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> None:
        self.store = store
        self.max_attempts = max_attempts

    def enqueue(
        self,
        kind: str,
        key: str,
        payload: dict[str, Any],
        *,
        group: str | None = None,
        remember: str | None = None,
        now: datetime | None = None,
    ) -> Enqueued:
        """Commit one item; idempotent on (kind, key). Returns once the row is durable. `remember`: an
        inbound request key (Store.mark_processed's) recorded in the same transaction, so that what
        accepted the request and what remembers it cannot part (and it costs one commit, not two)."""
        if not kind or not key:
            raise StoreError("a work item needs a kind and a key")
        at = _now(now)
        request_id = logs.current_request_id()
        if request_id is not None:
            payload = {**payload, REQUEST_ID_KEY: request_id}
        with self.store.writing() as session:
            if remember is not None:
                remember_processed(session, remember, at=at)
            inserted = session.execute(
                conflict_insert(self.store.engine, WorkItem)
                .values(
                    kind=kind,
                    key=key,
                    group_key=group,
                    payload=payload,
                    status=QUEUE_PENDING,
                    attempts=0,
                    available_at=at,
                    created_at=at,
                )
                .on_conflict_do_nothing(index_elements=["kind", "key"])
                .returning(WorkItem.id)
            ).scalar_one_or_none()
            if inserted is not None:
                return Enqueued(id=inserted, created=True)
            existing = session.scalars(
                select(WorkItem.id).where(WorkItem.kind == kind, WorkItem.key == key)
            ).one()
            return Enqueued(id=existing, created=False)

    def claim(
        self,
        worker: str,
        *,
        kinds: Sequence[str] | None = None,
        lease: timedelta = DEFAULT_LEASE,
        busy: Collection[int] = (),
        now: datetime | None = None,
    ) -> QueuedItem | None:
        """Take the oldest claimable item for `worker` (pending and due, or running with an expired
        lease), or None. An item that has used up its attempts is marked dead instead of handed out.

        `busy`: ids the worker's threads are still working on, never handed to it again. Their lease ran
        out because a heartbeat was late (a loaded machine), not because the worker died, and the next
        heartbeat renews it; taking them over would run an item twice at once in one process and spend
        an attempt each time, until a live item ended dead. An item the worker claimed but no longer
        works on (its retry could not be recorded: the database was down) is taken over as usual."""
        at = _now(now)
        older = aliased(WorkItem)
        blocked_by_older = exists().where(
            older.group_key == WorkItem.group_key,
            older.id < WorkItem.id,
            older.status.in_((QUEUE_PENDING, QUEUE_RUNNING)),
        )
        conditions = [
            or_(
                and_(WorkItem.status == QUEUE_PENDING, WorkItem.available_at <= at),
                and_(WorkItem.status == QUEUE_RUNNING, WorkItem.lease_until < at),
            ),
            or_(WorkItem.group_key.is_(None), ~blocked_by_older),
        ]
        if kinds is not None:
            conditions.append(WorkItem.kind.in_(list(kinds)))
        if busy:
            conditions.append(WorkItem.id.not_in(list(busy)))
        query = select(WorkItem).where(*conditions).order_by(WorkItem.id).limit(1)
        while True:
            with self.store.writing() as session:
                row = session.scalars(query.with_for_update(skip_locked=True, of=WorkItem)).first()
                if row is None:
                    return None
                if row.attempts >= self.max_attempts:
                    # Its workers keep dying on it (a poison item): stop handing it out.
                    row.status, row.finished_at, row.lease_until = QUEUE_DEAD, at, None
                    row.last_error = (row.last_error or "") + " [gave up: lease expired too often]"
                    continue
                row.status = QUEUE_RUNNING
                row.attempts = row.attempts + 1
                row.claimed_by = worker
                row.lease_until = at + lease
                session.flush()
                return _plain(row)

    def heartbeat(
        self, item_id: int, worker: str, *, lease: timedelta = DEFAULT_LEASE, now: datetime | None = None
    ) -> bool:
        """Extend the lease of an item `worker` still holds; False when it lost the item."""
        return self._owned_update(item_id, worker, lease_until=_now(now) + lease)

    def complete(
        self, item_id: int, worker: str, result: dict[str, Any] | None = None, *, now: datetime | None = None
    ) -> bool:
        """Mark done; False when `worker` no longer held the item (someone took over its lease)."""
        return self._owned_update(
            item_id, worker, status=QUEUE_DONE, finished_at=_now(now), lease_until=None, result=result
        )

    def retry(
        self,
        item_id: int,
        worker: str,
        error: str,
        *,
        delay: timedelta,
        permanent: bool = False,
        consume_attempt: bool = True,
        now: datetime | None = None,
    ) -> bool:
        """Give the item back to be tried again after `delay` (dead when permanent or out of attempts).
        `consume_attempt=False`: the failure was not the item's (Slack or the database was down), so it
        does not count towards its attempts, and an outage of any length loses nothing."""
        at = _now(now)
        with self.store.writing() as session:
            row = session.get(WorkItem, item_id, with_for_update=True)
            if row is None or row.status != QUEUE_RUNNING or row.claimed_by != worker:
                return False
            row.last_error = error[:ERROR_TEXT_LIMIT]
            row.lease_until = None
            if not consume_attempt:
                row.attempts = max(0, row.attempts - 1)
            if permanent or row.attempts >= self.max_attempts:
                row.status, row.finished_at = QUEUE_DEAD, at
            else:
                row.status, row.available_at = QUEUE_PENDING, at + delay
            return True

    def get(self, item_id: int) -> QueuedItem:
        with self.store.reading() as session:
            row = session.get(WorkItem, item_id)
            if row is None:
                raise StoreError(f"no work item with id {item_id}")
            return _plain(row)

    def items(self, *, kind: str | None = None) -> list[QueuedItem]:
        with self.store.reading() as session:
            query = select(WorkItem).order_by(WorkItem.id)
            if kind is not None:
                query = query.where(WorkItem.kind == kind)
            return [_plain(row) for row in session.scalars(query)]

    def stats(self, *, now: datetime | None = None) -> QueueStats:
        at = _now(now)
        with self.store.reading() as session:
            rows = session.execute(
                select(WorkItem.kind, WorkItem.status, func.count())
                .where(WorkItem.status.in_((QUEUE_PENDING, QUEUE_RUNNING, QUEUE_DEAD)))
                .group_by(WorkItem.kind, WorkItem.status)
            ).all()
            oldest = session.scalar(
                select(func.min(WorkItem.created_at)).where(WorkItem.status == QUEUE_PENDING)
            )
        waiting: Counter[str] = Counter()
        running = dead = 0
        for kind, status, count in rows:
            if status == QUEUE_DEAD:
                dead += count
                continue
            waiting[kind] += count
            running += count if status == QUEUE_RUNNING else 0
        if oldest is not None and oldest.tzinfo is None:
            oldest = oldest.replace(tzinfo=UTC)
        age = None if oldest is None else max(0.0, (at - oldest).total_seconds())
        return QueueStats(waiting_by_kind=dict(waiting), running=running, dead=dead, oldest_pending_age_s=age)

    def _owned_update(self, item_id: int, worker: str, **values: Any) -> bool:
        with self.store.writing() as session:
            done = session.execute(
                update(WorkItem)
                .where(
                    WorkItem.id == item_id,
                    WorkItem.claimed_by == worker,
                    WorkItem.status == QUEUE_RUNNING,
                )
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            return bool(done.rowcount)
