"""Claiming the weekly digest of a (channel, ISO week) before posting it, so that one replica posts it
however many run, and a restarted bot knows whether the week is done.

The claim is an INSERT ... ON CONFLICT DO NOTHING on the unique (channel, week) pair: portable to SQLite
and PostgreSQL, and the database, not a lock in some process, decides who won.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from sqlalchemy import delete, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from bot.store.engine import conflict_insert
from bot.store.models import DigestPost

ClaimOutcome = Literal["claimed", "taken-over", "posted", "in-progress"]


@dataclass(frozen=True, slots=True)
class DigestClaim:
    """`outcome`: `claimed` / `taken-over` (this caller must post now), `posted` (done before, `ts`
    says where), `in-progress` (another replica claimed it moments ago)."""

    id: int
    channel: str
    week: str
    outcome: ClaimOutcome
    claimed_by: str
    posted_at: datetime | None = None
    slack_ts: str | None = None

    @property
    def won(self) -> bool:
        return self.outcome in ("claimed", "taken-over")


def claim(
    session: Session,
    *,
    channel: str,
    week: str,
    as_of: datetime,
    claimant: str,
    at: datetime,
    lease: timedelta,
) -> DigestClaim:
    # RETURNING gives the id only when this statement inserted the row (rowcount is not reliable for
    # ORM-enabled inserts on PostgreSQL).
    inserted = session.scalar(
        conflict_insert(session.get_bind(), DigestPost)
        .values(channel=channel, week=week, as_of=as_of, claimed_by=claimant, claimed_at=at)
        .on_conflict_do_nothing(index_elements=["channel", "week"])
        .returning(DigestPost.id)
    )
    row = session.scalars(
        select(DigestPost).where(DigestPost.channel == channel, DigestPost.week == week)
    ).one()
    if inserted is not None:
        return _claim_of(row, "claimed")
    if row.posted_at is not None:
        return _claim_of(row, "posted")
    if row.claimed_at > at - lease:
        return _claim_of(row, "in-progress")
    # The claimant died between claiming and posting: take over, unless another replica just did.
    taken = _changed(
        session,
        update(DigestPost)
        .where(
            DigestPost.id == row.id,
            DigestPost.posted_at.is_(None),
            DigestPost.claimed_at == row.claimed_at,
        )
        .values(claimed_by=claimant, claimed_at=at, as_of=as_of),
    )
    session.refresh(row)
    return _claim_of(row, "taken-over" if taken.rowcount == 1 else "in-progress")


def mark_posted(session: Session, claim_id: int, claimant: str, ts: str, at: datetime) -> bool:
    """False when the claim is no longer this claimant's (it was taken over after the lease ran out)."""
    done = _changed(
        session,
        update(DigestPost)
        .where(DigestPost.id == claim_id, DigestPost.claimed_by == claimant)
        .values(posted_at=at, slack_ts=ts),
    )
    return done.rowcount == 1


def release(session: Session, claim_id: int, claimant: str) -> None:
    """Give a claim back after a failed post, so that the next attempt (a retry, another replica, the
    next start) can post the week's digest."""
    session.execute(
        delete(DigestPost).where(
            DigestPost.id == claim_id, DigestPost.claimed_by == claimant, DigestPost.posted_at.is_(None)
        )
    )


def find(session: Session, channel: str, week: str) -> DigestClaim | None:
    row = session.scalars(
        select(DigestPost).where(DigestPost.channel == channel, DigestPost.week == week)
    ).one_or_none()
    if row is None:
        return None
    return _claim_of(row, "posted" if row.posted_at is not None else "in-progress")


def _changed(session: Session, statement: Any) -> CursorResult[Any]:
    """Execute a DML statement; its result carries the number of rows it changed."""
    return cast(CursorResult[Any], session.execute(statement))


def _claim_of(row: DigestPost, outcome: ClaimOutcome) -> DigestClaim:
    return DigestClaim(
        id=row.id,
        channel=row.channel,
        week=row.week,
        outcome=outcome,
        claimed_by=row.claimed_by,
        posted_at=row.posted_at,
        slack_ts=row.slack_ts,
    )
