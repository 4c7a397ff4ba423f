"""The digest's questions beyond `ncclbot report`'s: recurring fingerprints, incidents left open, what
users corrected, and the per-week and per-node counts its charts draw. Same conventions as
`bot.store.queries`: a session and explicit times in, plain rows out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.store.models import STATUS_OPEN, Feedback, Incident, Node, Occurrence
from bot.store.queries import list_incidents
from bot.store.records import IncidentSummary


@dataclass(frozen=True, slots=True)
class FingerprintRow:
    """Occurrences of one fingerprint in the period (and the period before), over how many incidents;
    `incident_id` is its most recent incident (the Slack thread to look at)."""

    fingerprint: str
    class_id: str
    count: int
    previous: int
    incidents: int
    incident_id: int
    culprit_hosts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CorrectionRow:
    """A user said the diagnosis of `incident_id` was wrong: `given` is the class the bot named,
    `corrected` the one the user chose (None when they only said "wrong")."""

    incident_id: int
    given: str
    corrected: str | None
    user: str
    at: datetime
    note: str | None = None  # what the user wrote, if anything


@dataclass(frozen=True, slots=True)
class NodeIncident:
    hostname: str
    cluster: str | None
    incident_id: int


@dataclass(frozen=True, slots=True)
class NodeClassCount:
    hostname: str
    cluster: str | None
    class_id: str
    count: int


def top_fingerprints(session: Session, *, days: int, now: datetime, limit: int = 5) -> list[FingerprintRow]:
    """Fingerprints seen at least twice in the last `days`, most frequent first."""
    start, before = now - timedelta(days=days), now - timedelta(days=2 * days)
    current = func.count().filter(Occurrence.occurred_at > start)
    previous = func.count().filter(Occurrence.occurred_at <= start)
    rows = session.execute(
        select(
            Incident.fingerprint,
            current,
            previous,
            func.count(func.distinct(Occurrence.incident_id)).filter(Occurrence.occurred_at > start),
            func.max(Occurrence.incident_id),
        )
        .join(Incident, Incident.id == Occurrence.incident_id)
        .where(Occurrence.occurred_at > before, Occurrence.occurred_at <= now)
        .group_by(Incident.fingerprint)
        .having(current >= 2)
        .order_by(current.desc(), Incident.fingerprint)
        .limit(limit)
    ).all()
    result = []
    for fingerprint, count, earlier, incidents, newest in rows:
        incident = session.get_one(Incident, newest)
        result.append(
            FingerprintRow(
                fingerprint=fingerprint,
                class_id=incident.class_id,
                count=int(count),
                previous=int(earlier),
                incidents=int(incidents),
                incident_id=int(newest),
                culprit_hosts=tuple(incident.culprit_hosts),
            )
        )
    return result


def stale_open_incidents(
    session: Session, *, now: datetime, older_than_days: int, limit: int = 10
) -> list[IncidentSummary]:
    """Incidents still open (not resolved, not snoozed) that began more than `older_than_days` ago,
    oldest first."""
    ids = session.scalars(
        select(Incident.id)
        .where(Incident.status == STATUS_OPEN, Incident.first_seen <= now - timedelta(days=older_than_days))
        .order_by(Incident.first_seen, Incident.id)
        .limit(limit)
    ).all()
    found = {i.id: i for i in list_incidents(session, open_only=True, limit=limit, ids=list(ids))}
    return [found[i] for i in ids if i in found]


def corrections(session: Session, *, days: int, now: datetime) -> list[CorrectionRow]:
    """Feedback in the last `days` that called a diagnosis wrong, newest first."""
    rows = session.execute(
        select(Feedback, Incident.class_id)
        .join(Incident, Incident.id == Feedback.incident_id)
        .where(
            Feedback.correct.is_(False),
            Feedback.created_at > now - timedelta(days=days),
            Feedback.created_at <= now,
        )
        .order_by(Feedback.created_at.desc(), Feedback.id.desc())
    ).all()
    return [
        CorrectionRow(
            incident_id=feedback.incident_id,
            given=given,
            corrected=feedback.corrected_class,
            user=feedback.slack_user,
            at=feedback.created_at,
            note=feedback.note,
        )
        for feedback, given in rows
    ]


def class_counts(session: Session, *, start: datetime, end: datetime) -> dict[str, int]:
    """Occurrences per class in (start, end]."""
    rows = session.execute(
        select(Occurrence.class_id, func.count())
        .where(Occurrence.occurred_at > start, Occurrence.occurred_at <= end)
        .group_by(Occurrence.class_id)
    ).all()
    return {class_id: int(count) for class_id, count in rows}


def latest_incident_per_node(session: Session, *, start: datetime, end: datetime) -> list[NodeIncident]:
    """The most recent incident each culprit node initiated in (start, end] (what a Drain button on
    a lemon node refers to)."""
    per_node = (
        select(Occurrence.node_id, func.max(Occurrence.incident_id).label("incident_id"))
        .where(Occurrence.node_id.is_not(None), Occurrence.occurred_at > start, Occurrence.occurred_at <= end)
        .group_by(Occurrence.node_id)
        .subquery()
    )
    rows = session.execute(
        select(Node.hostname, Node.cluster, per_node.c.incident_id).join(
            per_node, per_node.c.node_id == Node.id
        )
    ).all()
    return sorted(
        (NodeIncident(host, cluster or None, int(incident)) for host, cluster, incident in rows),
        key=lambda r: (r.hostname, r.cluster or ""),
    )


def node_class_counts(session: Session, *, start: datetime, end: datetime) -> list[NodeClassCount]:
    """Occurrences per (culprit node, class) in (start, end]; occurrences without a node are left out."""
    per_node = (
        select(Occurrence.node_id, Occurrence.class_id, func.count().label("n"))
        .where(Occurrence.node_id.is_not(None), Occurrence.occurred_at > start, Occurrence.occurred_at <= end)
        .group_by(Occurrence.node_id, Occurrence.class_id)
        .subquery()
    )
    rows = session.execute(
        select(Node.hostname, Node.cluster, per_node.c.class_id, per_node.c.n).join(
            per_node, per_node.c.node_id == Node.id
        )
    ).all()
    result = [NodeClassCount(host, cluster or None, class_id, int(n)) for host, cluster, class_id, n in rows]
    return sorted(result, key=lambda r: (r.hostname, r.cluster or "", r.class_id))
