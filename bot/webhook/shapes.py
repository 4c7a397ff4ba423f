"""The payload shapes the webhook accepts, each converted to the generic `JobFailedEvent`.

A registry, tried in order: the first shape whose `matches` says yes parses the document. Adding a
sender is one model with `to_events` and one line in SHAPES.

- `slurm`: what deploy/slurm/ncclbot-epilog sends (EpilogSlurmctld or jobcomp/script fields).
- `alertmanager`: Alertmanager's webhook (version 4); each firing alert naming a job is one event.
- `diagnosis`: a bare `ncclbot diagnose --json` document, the job named in the query string
  (`?cluster=C&job_id=ID[&attempt=N]`).
- `generic`: DESIGN.md's version-1 event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from bot.jobs.slurm import hostlist
from bot.jobs.slurm.patterns import has_symbols
from bot.webhook.payloads import CHANNEL, JobFailedEvent, PrecomputedDiagnosis

Text = Annotated[str, StringConstraints(max_length=4096)]


class NoEvent(ValueError):
    """A well-formed payload that names no failed job (a resolved alert): answered 422 with the reason."""


class SlurmPayload(BaseModel):
    """Sent by the epilog: Slurm's own field names where it has them, the raw patterns included."""

    model_config = ConfigDict(extra="ignore")

    source: Literal["slurm"]
    hook: Literal["epilog_slurmctld", "jobcomp"] = "epilog_slurmctld"
    cluster: str
    job_id: str
    array_job_id: str | None = None
    array_task_id: str | None = None
    job_name: Text | None = None
    user: Text | None = None
    partition: Text | None = None
    state: Text | None = None
    reason: Text | None = None
    exit_code: Text | None = None  # "1:0" (code:signal)
    node_list: Text | None = None  # compressed host list, as in SLURM_JOB_NODELIST
    work_dir: Text | None = None
    std_out: Text | None = None
    std_err: Text | None = None
    restart_count: int = Field(0, ge=0)
    channel: Annotated[str, StringConstraints(pattern=CHANNEL)] | None = None
    diagnosis: PrecomputedDiagnosis | None = None

    def to_events(self, query: Mapping[str, str]) -> list[JobFailedEvent]:
        code = (self.exit_code or "").partition(":")[0]
        # Paths already expanded by Slurm are read as given; a pattern is left to the slurm job source,
        # which knows the job's fields (scontrol), or to the bot's own lookup.
        paths = [p for p in (self.std_out, self.std_err) if p and p.startswith("/") and not has_symbols(p)]
        return [
            JobFailedEvent(
                cluster=self.cluster,
                job_id=self.job_id,
                attempt=self.restart_count,
                state=self.state,
                exit_code=int(code) if code.strip().isdigit() else None,
                nodes=hostlist.expand(self.node_list) if self.node_list else [],
                user=self.user,
                job_name=self.job_name,
                channel=self.channel,
                log_paths=list(dict.fromkeys(paths)),
                diagnosis=self.diagnosis,
                received_as="slurm",
            )
        ]


class Alert(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    fingerprint: str | None = None


# Label names that carry the job and the cluster, most specific first. (`job` is last on purpose: in
# Prometheus it is usually the scrape job, so alert rules should set `job_id` or `job_name`.)
JOB_LABELS = ("ncclbot_job_id", "job_id", "jobset_name", "pytorchjob", "job_name", "job")
CLUSTER_LABELS = ("ncclbot_cluster", "cluster")


class AlertmanagerPayload(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: Literal["4"]
    status: str
    alerts: list[Alert] = Field(max_length=10_000)
    commonLabels: dict[str, str] = Field(default_factory=dict)  # Alertmanager's own (camelCase) name

    def to_events(self, query: Mapping[str, str]) -> list[JobFailedEvent]:
        events = []
        for alert in self.alerts:
            if alert.status != "firing":
                continue
            labels = {**self.commonLabels, **alert.labels}
            job = next((labels[name] for name in JOB_LABELS if labels.get(name)), None)
            cluster = next((labels[name] for name in CLUSTER_LABELS if labels.get(name)), None)
            if job is None or cluster is None:
                continue
            namespace = labels.get("namespace")
            attempt = labels.get("attempt", "0")
            events.append(
                JobFailedEvent(
                    cluster=cluster,
                    job_id=f"{namespace}/{job}" if namespace and "/" not in job else job,
                    attempt=int(attempt) if attempt.isdigit() else 0,
                    state=labels.get("state") or "FAILED",
                    channel=labels.get("channel") or None,
                    received_as="alertmanager",
                )
            )
        if not events:
            raise NoEvent(
                f"no firing alert names a job and a cluster (labels {'/'.join(JOB_LABELS[:5])} "
                f"and {'/'.join(CLUSTER_LABELS)})"
            )
        return events


class BareDiagnosis(PrecomputedDiagnosis):
    def to_events(self, query: Mapping[str, str]) -> list[JobFailedEvent]:
        missing = [name for name in ("cluster", "job_id") if not query.get(name)]
        if missing:
            raise NoEvent(f"a bare diagnosis needs ?{'&'.join(f'{m}=...' for m in missing)} in the URL")
        attempt = query.get("attempt", "0")
        return [
            JobFailedEvent(
                cluster=query["cluster"],
                job_id=query["job_id"],
                attempt=int(attempt) if attempt.isdigit() else 0,
                channel=query.get("channel") or None,
                diagnosis=PrecomputedDiagnosis.model_validate(self.model_dump(by_alias=True)),
                received_as="diagnosis",
            )
        ]


class GenericPayload(JobFailedEvent):
    def to_events(self, query: Mapping[str, str]) -> list[JobFailedEvent]:
        return [JobFailedEvent.model_validate(self.model_dump())]


@dataclass(frozen=True)
class Shape:
    name: str
    matches: Callable[[dict[str, Any]], bool]
    model: type[SlurmPayload] | type[AlertmanagerPayload] | type[BareDiagnosis] | type[GenericPayload]


SHAPES: tuple[Shape, ...] = (
    Shape("slurm", lambda doc: doc.get("source") == "slurm", SlurmPayload),
    Shape("alertmanager", lambda doc: "alerts" in doc and "receiver" in doc, AlertmanagerPayload),
    Shape("diagnosis", lambda doc: "diagnoses" in doc and "job_id" not in doc, BareDiagnosis),
    Shape("generic", lambda doc: True, GenericPayload),
)


def shape_of(document: dict[str, Any]) -> Shape:
    return next(shape for shape in SHAPES if shape.matches(document))


def to_events(document: dict[str, Any], query: Mapping[str, str]) -> tuple[str, list[JobFailedEvent]]:
    """(shape name, events); raises pydantic.ValidationError, NoEvent or bot.jobs.model.JobError."""
    shape = shape_of(document)
    return shape.name, shape.model.model_validate(document).to_events(query)
