"""Typed ORM models of the incident store (SQLAlchemy 2.x). The schema itself is owned by the Alembic
migrations in `migrations/versions`; a test checks that the two agree."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

# Named constraints, so that Alembic's batch mode on SQLite can find them again.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

STATUS_OPEN = "open"
STATUS_RESOLVED = "resolved"
STATUS_SNOOZED = "snoozed"


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out, on every backend.

    SQLite has no time zones: values are stored as naive UTC and given their zone back on the way out,
    so comparisons in SQL stay correct on both databases.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("the store only accepts timezone-aware datetimes")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[Any]: JSON(),
    }


class Node(Base):
    """A host as seen by the store; `cluster` is '' when unknown so the pair stays unique."""

    __tablename__ = "nodes"
    __table_args__ = (UniqueConstraint("hostname", "cluster", name="uq_nodes_hostname_cluster"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    hostname: Mapped[str] = mapped_column(String(255))
    cluster: Mapped[str] = mapped_column(String(255), default="")
    first_seen: Mapped[datetime]

    incidents: Mapped[list[Incident]] = relationship(back_populates="node")
    probe_runs: Mapped[list[ProbeRun]] = relationship(back_populates="node")


class Incident(Base):
    """Occurrences of one fingerprint close together in time: one Slack thread, one resolution."""

    __tablename__ = "incidents"
    __table_args__ = (
        Index("ix_incidents_fingerprint_last_seen", "fingerprint", "last_seen"),
        Index("ix_incidents_status", "status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(80))
    class_id: Mapped[str] = mapped_column(String(64))
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id"), index=True)
    culprit_hosts: Mapped[list[Any]] = mapped_column(default=list)
    culprit_ranks: Mapped[list[Any]] = mapped_column(default=list)
    cluster: Mapped[str | None] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16), default=STATUS_OPEN)
    snoozed_until: Mapped[datetime | None]
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]
    occurrence_count: Mapped[int] = mapped_column("occurrences", Integer, default=0)
    resolved_at: Mapped[datetime | None]
    resolved_by: Mapped[str | None] = mapped_column(String(255))
    resolution_fix: Mapped[str | None] = mapped_column(Text)
    slack_channel: Mapped[str | None] = mapped_column(String(64))
    slack_ts: Mapped[str | None] = mapped_column(String(32))

    node: Mapped[Node | None] = relationship(back_populates="incidents")
    occurrences: Mapped[list[Occurrence]] = relationship(back_populates="incident")


class Occurrence(Base):
    """One stored diagnosis. `class_id` and `node_id` repeat the incident's so that the recurrence
    queries read one indexed table."""

    __tablename__ = "occurrences"
    __table_args__ = (
        # Covering index: the per-period recurrence, cost and lemon queries read it alone (index-only
        # scan on PostgreSQL; SQLite has no INCLUDE and gets the key columns).
        Index(
            "ix_occurrences_recurrence_cover",
            "occurred_at",
            "class_id",
            "node_id",
            postgresql_include=["incident_id", "gpu_hours_lost"],
        ),
        Index("ix_occurrences_class_id_occurred_at", "class_id", "occurred_at"),
        Index("ix_occurrences_node_id_occurred_at", "node_id", "occurred_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id"), index=True)
    occurred_at: Mapped[datetime]
    source: Mapped[str] = mapped_column(String(16))
    job_id: Mapped[str | None] = mapped_column(String(255))
    cluster: Mapped[str | None] = mapped_column(String(255))
    input_digest: Mapped[str] = mapped_column(String(128))
    class_id: Mapped[str] = mapped_column(String(64))
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id"))
    confidence: Mapped[float] = mapped_column(Float)
    evidence_excerpt: Mapped[str] = mapped_column(Text, default="")
    ranks: Mapped[list[Any]] = mapped_column(default=list)
    world_size: Mapped[int | None]
    timeout_ms: Mapped[int | None]
    since_progress_ms: Mapped[int | None]
    gpu_hours_lost: Mapped[float | None] = mapped_column(Float)
    # The diagnosis as `ncclbot diagnose --json` prints it (evidence trimmed), so that a front end can
    # draw the incident again later (after a button press, a correction) without the logs.
    document: Mapped[dict[str, Any] | None]

    # Which signature catalog + analysis rules produced this diagnosis (matcher/analysis-version.toml):
    # incidents grouped before a tuning change stay explicable. NULL for rows stored before it existed.
    analysis_version: Mapped[str | None] = mapped_column(String(64))

    incident: Mapped[Incident] = relationship(back_populates="occurrences")


# Idempotency: the same job (or no job at all) with the same input bytes is the same occurrence.
# NULL never collides in a unique index, hence the coalesce.
Index(
    "uq_occurrences_job_digest",
    func.coalesce(Occurrence.job_id, ""),
    Occurrence.input_digest,
    unique=True,
)


class ProbeRun(Base):
    """One allreduce probe / node check run; `metrics` is the probe's whole JSON result."""

    __tablename__ = "probe_runs"
    __table_args__ = (Index("ix_probe_runs_node_id_started_at", "node_id", "started_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"))
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    recorded_at: Mapped[datetime]
    verdict: Mapped[str] = mapped_column(String(32))
    backend: Mapped[str | None] = mapped_column(String(32))
    world_size: Mapped[int | None]
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)

    node: Mapped[Node] = relationship(back_populates="probe_runs")


class Feedback(Base):
    """A Slack user's verdict on a diagnosis: correct, or wrong with the class it should have been."""

    __tablename__ = "feedback"

    id: Mapped[int] = mapped_column(primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id"), index=True)
    slack_user: Mapped[str] = mapped_column(String(64))
    correct: Mapped[bool]
    corrected_class: Mapped[str | None] = mapped_column(String(64))
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]


class AuditLog(Base):
    """Who did what, when: every change made to an incident by a person or by the bot."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(index=True)
    actor: Mapped[str] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(64))
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("incidents.id"), index=True)
    detail: Mapped[dict[str, Any]] = mapped_column(default=dict)


class IncidentFile(Base):
    """A log file kept with an incident (its bundle): re-diagnosed when more files join, and exported
    with the feedback as labelled cases. `origin` names where it came from (a Slack file id, a path), so
    the same file joins once. `occurrence_id` is the diagnosis the file belongs to (a repeat from another
    job brings a bundle of its own; files from before revision 0008 have none). `external`: the path is
    the job's own log (read where it lies, never copied, counted or deleted by the bot)."""

    __tablename__ = "incident_files"
    __table_args__ = (UniqueConstraint("incident_id", "origin", name="uq_incident_files_incident_id_origin"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id"))
    name: Mapped[str] = mapped_column(String(255))
    path: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    origin: Mapped[str] = mapped_column(String(255))
    added_at: Mapped[datetime] = mapped_column(index=True)
    occurrence_id: Mapped[int | None] = mapped_column(ForeignKey("occurrences.id"), index=True)
    external: Mapped[bool] = mapped_column(default=False, server_default=false())


class ProcessedEvent(Base):
    """Keys of inbound events already taken in (a chat event id, a message's channel and ts): a retry or
    the same message seen through a second event type is recognised and dropped."""

    __tablename__ = "processed_events"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(index=True)


QUEUE_PENDING = "pending"
QUEUE_RUNNING = "running"
QUEUE_DONE = "done"
QUEUE_DEAD = "dead"


class WorkItem(Base):
    """One unit of durable background work (a failed job to diagnose and post, a Slack upload to read).

    Accepted work is committed here before anyone is told it was accepted; workers claim rows, and a
    claim that outlives its lease (the worker died) is taken over. `(kind, key)` is unique: the same
    event sent twice is one item. Items sharing a `group_key` run one at a time, oldest first."""

    __tablename__ = "work_items"
    __table_args__ = (
        UniqueConstraint("kind", "key", name="uq_work_items_kind_key"),
        Index("ix_work_items_status_available_at", "status", "available_at"),
        Index("ix_work_items_group_key_id", "group_key", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(512))
    group_key: Mapped[str | None] = mapped_column(String(512))
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(16), default=QUEUE_PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    available_at: Mapped[datetime]
    lease_until: Mapped[datetime | None]
    claimed_by: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class PostedMessage(Base):
    """A message the bot posted under an idempotency key: posting again with the key finds it here
    instead of posting twice. A message reference is plain data (channel, ts), not Slack code."""

    __tablename__ = "posted_messages"

    key: Mapped[str] = mapped_column(String(512), primary_key=True)
    channel: Mapped[str] = mapped_column(String(64))
    ts: Mapped[str] = mapped_column(String(32))
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    posted_at: Mapped[datetime]


class DigestPost(Base):
    """One weekly digest per (channel, ISO week). The row is claimed before the digest is posted, so
    that exactly one replica posts it and a restarted bot knows whether the week is done. A claim left
    by a replica that died before posting can be taken over once it is older than the lease."""

    __tablename__ = "digests"
    __table_args__ = (UniqueConstraint("channel", "week", name="uq_digests_channel_week"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    channel: Mapped[str] = mapped_column(String(64))
    week: Mapped[str] = mapped_column(String(10))  # ISO week, "2026-W49"
    as_of: Mapped[datetime]  # end of the period the digest covers
    claimed_by: Mapped[str] = mapped_column(String(255))
    claimed_at: Mapped[datetime]
    posted_at: Mapped[datetime | None]
    slack_ts: Mapped[str | None] = mapped_column(String(32))


class MinerState(Base):
    """A log-template miner's whole state (Drain3's snapshot), so that templates and their ids survive
    restarts and every replica mines into the same tree."""

    __tablename__ = "miner_states"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    state: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime]


class ResidueSample(Base):
    """Unrecognised error lines of one stored diagnosis (an `unknown` or low-confidence one), grouped by
    the template the miner put them in: how many lines, and one of them as written."""

    __tablename__ = "residue_samples"
    __table_args__ = (
        UniqueConstraint("occurrence_id", "template_id", name="uq_residue_samples_occurrence_id"),
        Index("ix_residue_samples_seen_at_template_id", "seen_at", "template_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    occurrence_id: Mapped[int] = mapped_column(ForeignKey("occurrences.id"))
    template_id: Mapped[int]
    lines: Mapped[int]
    example: Mapped[str] = mapped_column(Text)
    seen_at: Mapped[datetime]
