"""The questions the product asks of the store. Each takes a session and an explicit `now`, so that
results depend on the data alone; figures that need date arithmetic per row are finished in Python,
which keeps the SQL identical on SQLite and PostgreSQL."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.orm import Session

from bot.store.fingerprint import normalise_host
from bot.store.models import STATUS_RESOLVED, Incident, Node, Occurrence, ProbeRun
from bot.store.records import IncidentSummary, OccurrenceSummary, ProbeRunSummary
from bot.store.settings import FIX_HORIZON

Grouping = Literal["class", "node"]
PERIODS = (7, 30, 90)

# Lemon score weights: a failed probe is direct evidence against the node, a degraded one is a hint.
FAILED_PROBE_WEIGHT = 2.0
DEGRADED_PROBE_WEIGHT = 0.5
LEMON_MIN_INCIDENTS = 2


@dataclass(frozen=True, slots=True)
class RecurrenceRow:
    """Occurrences of one class (or on one node) in the last `days`, against the `days` before."""

    key: str
    cluster: str | None
    count: int
    previous: int

    @property
    def change(self) -> int:
        return self.count - self.previous

    @property
    def trend(self) -> Literal["new", "up", "down", "flat"]:
        if self.previous == 0 and self.count > 0:
            return "new"
        if self.count == self.previous:
            return "flat"
        return "up" if self.count > self.previous else "down"


@dataclass(frozen=True, slots=True)
class LemonNode:
    hostname: str
    cluster: str | None
    incidents: int  # distinct incidents this node initiated (was the culprit of)
    occurrences: int
    probe_runs: int
    failed_probes: int
    degraded_probes: int

    @property
    def score(self) -> float:
        return (
            self.incidents
            + FAILED_PROBE_WEIGHT * self.failed_probes
            + DEGRADED_PROBE_WEIGHT * self.degraded_probes
        )

    @property
    def is_lemon(self) -> bool:
        return self.incidents >= LEMON_MIN_INCIDENTS or self.failed_probes > 0


@dataclass(frozen=True, slots=True)
class CostRow:
    key: str
    cluster: str | None
    gpu_hours: float
    occurrences: int
    estimated: int  # occurrences whose cost could be estimated (world size and timeout known)


@dataclass(frozen=True, slots=True)
class MttrRow:
    key: str  # a class id, or "all"
    resolved: int
    mean_hours: float
    median_hours: float


@dataclass(frozen=True, slots=True)
class FixEffectiveness:
    """Resolutions that named this fix: held (no recurrence within the horizon), recurred, or still
    inside the horizon without a recurrence (pending)."""

    fix: str
    resolutions: int
    held: int
    recurred: int
    pending: int

    @property
    def held_rate(self) -> float | None:
        decided = self.held + self.recurred
        return None if decided == 0 else self.held / decided


def _node_label(node: Node | None) -> tuple[str, str | None]:
    if node is None:
        return "-", None
    return node.hostname, node.cluster or None


def _nodes_by_id(session: Session, ids: set[Any]) -> dict[int, Node]:
    wanted = {i for i in ids if isinstance(i, int)}
    if not wanted:
        return {}
    return {node.id: node for node in session.scalars(select(Node).where(Node.id.in_(wanted)))}


def _grouped(
    session: Session, by: Grouping, aggregates: list[Any], where: list[ColumnElement[bool]]
) -> list[tuple[Any, ...]]:
    """(label, cluster, *aggregates) per class, or per culprit node (named by hostname and cluster).

    Per node, the occurrences are aggregated first and only the resulting rows joined to the nodes,
    so the large table is read through its covering index alone."""
    if by == "class":
        rows = session.execute(
            select(Occurrence.class_id, *aggregates).where(*where).group_by(Occurrence.class_id)
        ).all()
        return [(row[0], None, *row[1:]) for row in rows]
    labelled = [aggregate.label(f"a{i}") for i, aggregate in enumerate(aggregates)]
    per_node = (
        select(Occurrence.node_id, *labelled)
        .where(Occurrence.node_id.is_not(None), *where)
        .group_by(Occurrence.node_id)
        .subquery()
    )
    rows = session.execute(
        select(Node.hostname, Node.cluster, *(per_node.c[f"a{i}"] for i in range(len(aggregates)))).join(
            per_node, per_node.c.node_id == Node.id
        )
    ).all()
    return [(row[0], row[1] or None, *row[2:]) for row in rows]


def recurrence(session: Session, *, by: Grouping, days: int, now: datetime) -> list[RecurrenceRow]:
    """Per class or per culprit node, most frequent first; occurrences without a node are left out of
    the per-node view."""
    current_start = now - timedelta(days=days)
    previous_start = now - timedelta(days=2 * days)
    current = func.count().filter(Occurrence.occurred_at > current_start)
    previous = func.count().filter(Occurrence.occurred_at <= current_start)
    where = [Occurrence.occurred_at > previous_start, Occurrence.occurred_at <= now]
    result = [
        RecurrenceRow(key=label, cluster=cluster, count=int(count), previous=int(before))
        for label, cluster, count, before in _grouped(session, by, [current, previous], where)
    ]
    return sorted(result, key=lambda r: (-r.count, -r.previous, r.key, r.cluster or ""))


def recurrence_report(session: Session, *, now: datetime) -> dict[Grouping, dict[int, list[RecurrenceRow]]]:
    """Per class and per node over 7, 30 and 90 days (the digest's table)."""
    return {
        by: {days: recurrence(session, by=by, days=days, now=now) for days in PERIODS}
        for by in ("class", "node")
    }


def lemon_nodes(session: Session, *, days: int, now: datetime) -> list[LemonNode]:
    """Nodes that initiated incidents or ran probes in the period, worst first."""
    start = now - timedelta(days=days)
    incident_rows = session.execute(
        select(Occurrence.node_id, func.count(func.distinct(Occurrence.incident_id)), func.count())
        .where(Occurrence.node_id.is_not(None), Occurrence.occurred_at > start, Occurrence.occurred_at <= now)
        .group_by(Occurrence.node_id)
    ).all()
    probe_time = func.coalesce(ProbeRun.started_at, ProbeRun.recorded_at)
    probe_rows = session.execute(
        select(
            ProbeRun.node_id,
            func.count(),
            func.count().filter(ProbeRun.verdict == "failed"),
            func.count().filter(ProbeRun.verdict == "degraded"),
        )
        .where(probe_time > start, probe_time <= now)
        .group_by(ProbeRun.node_id)
    ).all()
    incidents = {r[0]: (int(r[1]), int(r[2])) for r in incident_rows}
    probes = {r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in probe_rows}
    nodes = _nodes_by_id(session, set(incidents) | set(probes))
    result = []
    for node_id, node in nodes.items():
        distinct_incidents, occurrences = incidents.get(node_id, (0, 0))
        runs, failed, degraded = probes.get(node_id, (0, 0, 0))
        hostname, cluster = _node_label(node)
        result.append(LemonNode(hostname, cluster, distinct_incidents, occurrences, runs, failed, degraded))
    return sorted(result, key=lambda n: (-n.score, n.hostname, n.cluster or ""))


def gpu_hours_lost(session: Session, *, by: Grouping, days: int, now: datetime) -> list[CostRow]:
    """Estimated GPU-hours lost per class or per culprit node, costliest first (occurrences without a
    node are left out of the per-node view)."""
    where = [Occurrence.occurred_at > now - timedelta(days=days), Occurrence.occurred_at <= now]
    aggregates = [
        func.coalesce(func.sum(Occurrence.gpu_hours_lost), 0.0),
        func.count(),
        func.count(Occurrence.gpu_hours_lost),
    ]
    result = [
        CostRow(label, cluster, float(hours or 0.0), int(count), int(estimated))
        for label, cluster, hours, count, estimated in _grouped(session, by, aggregates, where)
    ]
    return sorted(result, key=lambda r: (-r.gpu_hours, r.key, r.cluster or ""))


def mttr(session: Session, *, days: int, now: datetime) -> list[MttrRow]:
    """Mean and median time from first seen to resolved, for incidents resolved in the period: all
    classes first, then per class."""
    start = now - timedelta(days=days)
    rows = session.execute(
        select(Incident.class_id, Incident.first_seen, Incident.resolved_at).where(
            Incident.resolved_at.is_not(None), Incident.resolved_at > start, Incident.resolved_at <= now
        )
    ).all()
    hours: dict[str, list[float]] = {"all": []}
    for class_id, first_seen, resolved_at in rows:
        assert resolved_at is not None  # filtered above
        duration = (resolved_at - first_seen).total_seconds() / 3600
        hours["all"].append(duration)
        hours.setdefault(class_id, []).append(duration)
    return [
        MttrRow(key, len(values), statistics.fmean(values), statistics.median(values))
        for key, values in sorted(hours.items(), key=lambda item: (item[0] != "all", item[0]))
        if values
    ]


def fix_effectiveness(
    session: Session, *, now: datetime, horizon: timedelta = FIX_HORIZON
) -> list[FixEffectiveness]:
    """For each fix named in a resolution: did the fingerprint come back within `horizon`?"""
    resolved = session.execute(
        select(Incident.fingerprint, Incident.resolved_at, Incident.resolution_fix).where(
            Incident.status == STATUS_RESOLVED,
            Incident.resolution_fix.is_not(None),
            Incident.resolved_at.is_not(None),
            Incident.resolved_at <= now,
        )
    ).all()
    outcomes: dict[str, Counter[str]] = {}
    for fingerprint, resolved_at, fix in resolved:
        assert resolved_at is not None and fix is not None  # filtered above
        recurrence_id: int | None = session.scalar(
            select(Occurrence.id)
            .join(Incident, Incident.id == Occurrence.incident_id)
            .where(
                Incident.fingerprint == fingerprint,
                Occurrence.occurred_at > resolved_at,
                Occurrence.occurred_at <= resolved_at + horizon,
            )
            .limit(1)
        )
        if recurrence_id is not None:
            outcome = "recurred"
        elif resolved_at + horizon > now:
            outcome = "pending"
        else:
            outcome = "held"
        outcomes.setdefault(fix.strip(), Counter())[outcome] += 1
    return sorted(
        (
            FixEffectiveness(fix, c.total(), c["held"], c["recurred"], c["pending"])
            for fix, c in outcomes.items()
        ),
        key=lambda f: (-f.resolutions, f.fix),
    )


def list_incidents(
    session: Session, *, open_only: bool, limit: int = 200, ids: Sequence[int] | None = None
) -> list[IncidentSummary]:
    """Most recently seen first; `open_only` keeps open and snoozed incidents."""
    query = select(Incident).order_by(Incident.last_seen.desc(), Incident.id.desc()).limit(limit)
    if open_only:
        query = query.where(Incident.status != STATUS_RESOLVED)
    if ids is not None:
        query = query.where(Incident.id.in_(ids))
    return [
        IncidentSummary(
            id=i.id,
            fingerprint=i.fingerprint,
            class_id=i.class_id,
            status=i.status,
            culprit_hosts=tuple(i.culprit_hosts),
            cluster=i.cluster,
            occurrences=i.occurrence_count,
            first_seen=i.first_seen,
            last_seen=i.last_seen,
            snoozed_until=i.snoozed_until,
            resolved_at=i.resolved_at,
            resolved_by=i.resolved_by,
            resolution_fix=i.resolution_fix,
            slack_channel=i.slack_channel,
            slack_ts=i.slack_ts,
        )
        for i in session.scalars(query)
    ]


def _node_filter(column: Any, node: str | None) -> list[ColumnElement[bool]]:
    if node is None:
        return []
    return [column.in_(select(Node.id).where(Node.hostname == normalise_host(node)))]


def history(
    session: Session,
    *,
    now: datetime,
    days: int,
    node: str | None = None,
    class_id: str | None = None,
    limit: int = 500,
) -> list[OccurrenceSummary]:
    """Occurrences in the last `days`, newest first, optionally on one node and/or of one class."""
    where: list[ColumnElement[bool]] = [
        Occurrence.occurred_at > now - timedelta(days=days),
        Occurrence.occurred_at <= now,
        *_node_filter(Occurrence.node_id, node),
    ]
    if class_id is not None:
        where.append(Occurrence.class_id == class_id)
    rows = session.execute(
        select(Occurrence, Node.hostname)
        .outerjoin(Node, Node.id == Occurrence.node_id)
        .where(and_(*where))
        .order_by(Occurrence.occurred_at.desc(), Occurrence.id.desc())
        .limit(limit)
    ).all()
    return [
        OccurrenceSummary(
            id=o.id,
            incident_id=o.incident_id,
            occurred_at=o.occurred_at,
            class_id=o.class_id,
            host=hostname,
            cluster=o.cluster,
            source=o.source,
            job_id=o.job_id,
            confidence=o.confidence,
            world_size=o.world_size,
            gpu_hours_lost=o.gpu_hours_lost,
            analysis_version=o.analysis_version,
        )
        for o, hostname in rows
    ]


def probe_runs(
    session: Session, *, now: datetime, days: int, node: str | None = None, limit: int = 200
) -> Sequence[ProbeRunSummary]:
    """Probe runs in the last `days`, newest first (for `history` and for probe baselines)."""
    when = func.coalesce(ProbeRun.started_at, ProbeRun.recorded_at)
    rows = session.execute(
        select(ProbeRun, Node)
        .join(Node, Node.id == ProbeRun.node_id)
        .where(when > now - timedelta(days=days), when <= now, *_node_filter(ProbeRun.node_id, node))
        .order_by(when.desc(), ProbeRun.id.desc())
        .limit(limit)
    ).all()
    return [
        ProbeRunSummary(
            id=run.id,
            host=node_row.hostname,
            cluster=node_row.cluster or None,
            verdict=run.verdict,
            started_at=run.started_at,
            finished_at=run.finished_at,
            recorded_at=run.recorded_at,
            result=dict(run.metrics),
        )
        for run, node_row in rows
    ]
