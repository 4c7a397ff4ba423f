"""Plain data the store hands out (never ORM objects, which are tied to a session)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


def iso_utc(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a `Z`, to the second (the JSON contract of DESIGN.md)."""
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def human_utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True, slots=True)
class IncidentRecord:
    """What `record_diagnosis` did: the incident the diagnosis joined (or opened) and how it recurs.

    `new_incident` is true when this diagnosis opened the incident (post a new Slack message),
    `duplicate` when the same job and input had been recorded before (nothing was counted again), and
    `refined` when it replaced an earlier diagnosis of the same failure (a bundle re-run with more files:
    nothing counted either).
    """

    id: int
    fingerprint: str
    class_id: str
    occurrences: int
    first_seen: datetime
    last_seen: datetime
    status: str
    culprit_hosts: tuple[str, ...]
    cluster: str | None
    occurrence_id: int
    new_incident: bool
    duplicate: bool
    recurrence_line: str | None = None
    slack_channel: str | None = None
    slack_ts: str | None = None
    refined: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "fingerprint": self.fingerprint,
            "occurrences": self.occurrences,
            "first_seen": iso_utc(self.first_seen),
            "last_seen": iso_utc(self.last_seen),
        }


@dataclass(frozen=True, slots=True)
class IncidentSummary:
    """One row of `ncclbot incidents`."""

    id: int
    fingerprint: str
    class_id: str
    status: str
    culprit_hosts: tuple[str, ...]
    cluster: str | None
    occurrences: int
    first_seen: datetime
    last_seen: datetime
    snoozed_until: datetime | None = None
    resolved_at: datetime | None = None
    resolved_by: str | None = None
    resolution_fix: str | None = None
    slack_channel: str | None = None
    slack_ts: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "fingerprint": self.fingerprint,
            "class": self.class_id,
            "status": self.status,
            "culprit_hosts": list(self.culprit_hosts),
            "cluster": self.cluster,
            "occurrences": self.occurrences,
            "first_seen": iso_utc(self.first_seen),
            "last_seen": iso_utc(self.last_seen),
            "snoozed_until": iso_utc(self.snoozed_until),
            "resolution": None
            if self.resolved_at is None
            else {"at": iso_utc(self.resolved_at), "by": self.resolved_by, "fix": self.resolution_fix},
        }


@dataclass(frozen=True, slots=True)
class OccurrenceSummary:
    """One row of `ncclbot history`."""

    id: int
    incident_id: int
    occurred_at: datetime
    class_id: str
    host: str | None
    cluster: str | None
    source: str
    job_id: str | None
    confidence: float
    world_size: int | None
    gpu_hours_lost: float | None
    analysis_version: str | None = None  # what produced it (None: stored before versions existed)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "incident": self.incident_id,
            "time": iso_utc(self.occurred_at),
            "class": self.class_id,
            "host": self.host,
            "cluster": self.cluster,
            "source": self.source,
            "job_id": self.job_id,
            "confidence": round(self.confidence, 3),
            "world_size": self.world_size,
            "gpu_hours_lost": None if self.gpu_hours_lost is None else round(self.gpu_hours_lost, 3),
            "analysis_version": self.analysis_version,
        }


@dataclass(frozen=True, slots=True)
class ProbeRunSummary:
    """A stored probe run; `result` is the probe's JSON as it was recorded."""

    id: int
    host: str
    cluster: str | None
    verdict: str
    started_at: datetime | None
    finished_at: datetime | None
    recorded_at: datetime
    result: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "host": self.host,
            "cluster": self.cluster,
            "verdict": self.verdict,
            "started": iso_utc(self.started_at),
            "finished": iso_utc(self.finished_at),
            "reasons": list(self.result.get("reasons", [])),
        }


@dataclass(frozen=True, slots=True)
class FeedbackRecord:
    """A person's verdict on an incident's diagnosis (the newest one counts)."""

    id: int
    incident_id: int
    user: str
    correct: bool
    corrected_class: str | None
    note: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class IncidentFileRecord:
    """A log file kept with an incident's bundle."""

    id: int
    incident_id: int
    name: str
    path: str
    size_bytes: int
    origin: str
    added_at: datetime
    occurrence_id: int | None = None
    external: bool = False


@dataclass(frozen=True, slots=True)
class Bundle:
    """The logs a thread re-run reads: the files of one occurrence (the newest that has any), and that
    occurrence, which the re-run refines instead of counting a new one."""

    occurrence_id: int | None
    files: tuple[IncidentFileRecord, ...]


@dataclass(frozen=True, slots=True)
class RepeatNote:
    """An occurrence after an incident's first: its "seen again" note in the incident's thread."""

    occurrence_id: int
    ordinal: int  # 2 for the first repeat
    job_id: str | None


@dataclass(frozen=True, slots=True)
class IncidentDetail:
    """Everything needed to draw an incident again without its logs: the summary, the newest
    occurrence's diagnosis document and job, the recurrence line (with the message of the first
    occurrence in its scope, to link to), the newest feedback and the files of its bundle."""

    summary: IncidentSummary
    document: dict[str, Any] | None
    job_id: str | None
    recurrence_line: str | None
    first_message: tuple[str, str] | None
    feedback: FeedbackRecord | None
    files: tuple[IncidentFileRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class PostedRef:
    """Where a message posted under an idempotency key went (channel, ts; thread_ts for a reply)."""

    channel: str
    ts: str
    thread_ts: str | None = None


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One row of the audit log: who did what, when, to which incident, with what outcome."""

    id: int
    at: datetime
    actor: str
    action: str
    incident_id: int | None
    detail: dict[str, Any]
