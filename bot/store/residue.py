"""Storage for the residue miner: its state (one blob per miner name) and, per stored diagnosis, how
many unrecognised lines fell into each template, with one example line.

Mining reads the state, adds lines and writes it back: `ResidueWriter` does that inside one write
transaction that holds a per-miner lock, so two replicas mining at once never lose each other's
templates.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from bot.store.engine import conflict_insert
from bot.store.models import MinerState, Occurrence, ResidueSample

EXAMPLE_CHARS = 500


@dataclass(frozen=True, slots=True)
class TemplateLines:
    """What one diagnosis contributed to one template."""

    template_id: int
    lines: int
    example: str


@dataclass(frozen=True, slots=True)
class ResidueCount:
    """A template's figures over a period: in how many diagnoses, how many lines, and which classes
    those diagnoses got."""

    template_id: int
    occurrences: int
    lines: int
    first_seen: datetime
    last_seen: datetime
    classes: tuple[str, ...]


class ResidueWriter:
    """The miner's state and the samples of one diagnosis, written in the caller's transaction."""

    def __init__(self, session: Session, name: str) -> None:
        self._session = session
        self._name = name

    def state(self) -> bytes | None:
        row = self._session.get(MinerState, self._name)
        return None if row is None else bytes(row.state)

    def save_state(self, state: bytes, at: datetime) -> None:
        statement = conflict_insert(self._session.get_bind(), MinerState).values(
            name=self._name, state=state, updated_at=at
        )
        self._session.execute(
            statement.on_conflict_do_update(index_elements=["name"], set_={"state": state, "updated_at": at})
        )

    def add_samples(self, occurrence_id: int, samples: Sequence[TemplateLines], at: datetime) -> None:
        existing = set(
            self._session.scalars(
                select(ResidueSample.template_id).where(ResidueSample.occurrence_id == occurrence_id)
            )
        )
        for sample in samples:
            if sample.template_id in existing:
                continue  # the same diagnosis mined twice (a replay) counts once
            self._session.add(
                ResidueSample(
                    occurrence_id=occurrence_id,
                    template_id=sample.template_id,
                    lines=sample.lines,
                    example=sample.example[:EXAMPLE_CHARS],
                    seen_at=at,
                )
            )


def lock_miner(session: Session, name: str) -> None:
    """Serialise miners of one state on PostgreSQL; on SQLite the write transaction (BEGIN IMMEDIATE)
    already holds the database lock."""
    if session.get_bind().dialect.name == "postgresql":
        key = int.from_bytes(hashlib.sha256(f"miner:{name}".encode()).digest()[:8], "big", signed=True)
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def miner_state(session: Session, name: str) -> bytes | None:
    row = session.get(MinerState, name)
    return None if row is None else bytes(row.state)


def residue_counts(session: Session, *, start: datetime, end: datetime) -> list[ResidueCount]:
    """Templates seen in (start, end], in the most diagnoses first."""
    window = [ResidueSample.seen_at > start, ResidueSample.seen_at <= end]
    rows = session.execute(
        select(
            ResidueSample.template_id,
            func.count(func.distinct(ResidueSample.occurrence_id)),
            func.sum(ResidueSample.lines),
            func.min(ResidueSample.seen_at),
            func.max(ResidueSample.seen_at),
        )
        .where(*window)
        .group_by(ResidueSample.template_id)
    ).all()
    classes: dict[int, set[str]] = {}
    for template_id, class_id in session.execute(
        select(ResidueSample.template_id, Occurrence.class_id)
        .join(Occurrence, Occurrence.id == ResidueSample.occurrence_id)
        .where(*window)
        .distinct()
    ):
        classes.setdefault(template_id, set()).add(class_id)
    counts = [
        ResidueCount(
            template_id=template_id,
            occurrences=int(occurrences),
            lines=int(lines or 0),
            first_seen=first,
            last_seen=last,
            classes=tuple(sorted(classes.get(template_id, ()))),
        )
        for template_id, occurrences, lines, first, last in rows
    ]
    return sorted(counts, key=lambda c: (-c.occurrences, -c.lines, c.template_id))


def examples(session: Session, template_id: int, *, limit: int, end: datetime | None = None) -> list[str]:
    """Distinct example lines of a template, newest first."""
    query = (
        select(ResidueSample.example, func.max(ResidueSample.seen_at).label("newest"))
        .where(ResidueSample.template_id == template_id)
        .group_by(ResidueSample.example)
        .order_by(func.max(ResidueSample.seen_at).desc(), ResidueSample.example)
        .limit(limit)
    )
    if end is not None:
        query = query.where(ResidueSample.seen_at <= end)
    return [row[0] for row in session.execute(query)]
