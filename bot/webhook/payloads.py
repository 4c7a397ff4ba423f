"""The generic job-failure event (DESIGN.md, version 1) and the pre-computed diagnosis it may carry.

Every accepted shape (shapes.py) is converted to `JobFailedEvent`; that is what the queue stores and the
worker reads. Names that reach a scheduler, a path or Slack are validated here, so a bad one is a 422
with the field named, never a surprise later.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from bot.jobs import names
from bot.jobs.model import JobError
from matcher.model import ClassScore, Culprit, Diagnosis, Evidence, Stats
from matcher.taxonomy import CLASSES

# Slack channel ids (C0123ABC, G..., D...) or a channel name (#incidents, incidents).
CHANNEL = r"^#?[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"
# A log's display name: a file name, no folders (it is written into a scratch folder by that name).
LOG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}$")
MAX_EVIDENCE = 200
MAX_NODES = 100_000

ShortText = Annotated[str, StringConstraints(max_length=500)]


def _checked(check: Callable[[], str]) -> str:
    """A bot.jobs.names check as a pydantic validation error (422 with the field named)."""
    try:
        return check()
    except JobError as error:
        raise ValueError(str(error)) from None


def _hosts(hosts: list[str]) -> list[str]:
    checked = []
    for host in hosts:
        try:
            checked.append(names.host(host))
        except JobError as error:
            raise ValueError(str(error)) from None
    return checked


class EvidenceLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    source: Annotated[str, StringConstraints(max_length=1000)]
    line: int = Field(ge=0)
    text: Annotated[str, StringConstraints(max_length=10_000)]
    signature: Annotated[str, StringConstraints(max_length=200)]


class DiagnosisEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    class_id: str = Field(alias="class")
    confidence: float = Field(ge=0.0, le=1.0)
    title: ShortText = ""
    evidence: list[EvidenceLine] = Field(default_factory=list, max_length=MAX_EVIDENCE)

    @field_validator("class_id")
    @classmethod
    def _known_class(cls, value: str) -> str:
        if value not in CLASSES:
            raise ValueError(f"{value!r} is not a class id of TAXONOMY.md")
        return value


class CulpritEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ranks: list[int] = Field(default_factory=list, max_length=MAX_NODES)
    hosts: list[str] = Field(default_factory=list, max_length=MAX_NODES)
    reason: ShortText = ""

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        return _hosts(value)


class StatsEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    bytes: Annotated[int, Field(ge=0)] = 0
    lines: Annotated[int, Field(ge=0)] = 0
    ranks: Annotated[int, Field(ge=0)] = 0
    seconds: Annotated[float, Field(ge=0.0)] = 0.0


class PrecomputedDiagnosis(BaseModel):
    """`ncclbot diagnose --json`, made next to the logs (DESIGN.md contract): no logs travel."""

    model_config = ConfigDict(extra="ignore")

    schema_version: Literal[1]
    analysis_version: ShortText | None = None
    diagnoses: list[DiagnosisEntry] = Field(min_length=1, max_length=50)
    culprit: CulpritEntry | None = None
    symptom: ShortText | None = None
    stats: StatsEntry = StatsEntry()

    def to_diagnosis(self) -> Diagnosis:
        culprit = (
            Culprit(
                ranks=tuple(self.culprit.ranks), hosts=tuple(self.culprit.hosts), reason=self.culprit.reason
            )
            if self.culprit is not None
            else None
        )
        facts: dict[str, str | int | float] = {}
        if culprit is not None and culprit.hosts:
            facts["culprit_host"] = culprit.hosts[0]
        if culprit is not None and culprit.ranks:
            facts["culprit_rank"] = culprit.ranks[0]
        return Diagnosis(
            diagnoses=tuple(
                ClassScore(
                    class_id=entry.class_id,
                    confidence=entry.confidence,
                    title=entry.title or CLASSES[entry.class_id],
                    evidence=tuple(Evidence(e.source, e.line, e.text, e.signature) for e in entry.evidence),
                )
                for entry in self.diagnoses
            ),
            culprit=culprit,
            symptom=self.symptom,
            stats=Stats(self.stats.bytes, self.stats.lines, self.stats.ranks, self.stats.seconds),
            facts=facts,
        )

    def digest(self) -> str:
        """Stands in for the input digest in the store's idempotency key: the same JSON, the same id."""
        canonical = json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True).encode()
        return "precomputed:" + hashlib.sha256(canonical).hexdigest()


class InlineLog(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    text: str

    @field_validator("name")
    @classmethod
    def _file_name(cls, value: str) -> str:
        if not LOG_NAME.match(value) or ".." in value:
            raise ValueError(f"log name {value!r} must be a plain file name (letters, digits, . _ @ + -)")
        return value


class JobFailedEvent(BaseModel):
    """The generic payload (version 1). `key` is what makes it exactly-once: cluster, job, attempt."""

    model_config = ConfigDict(extra="ignore")

    version: Literal[1] = 1
    cluster: str
    job_id: str
    attempt: int = Field(0, ge=0, le=1_000_000)
    state: Annotated[str, StringConstraints(max_length=64, to_upper=True)] | None = None
    exit_code: int | None = None
    nodes: list[str] = Field(default_factory=list, max_length=MAX_NODES)
    user: Annotated[str, StringConstraints(max_length=255)] | None = None
    job_name: Annotated[str, StringConstraints(max_length=255)] | None = None
    channel: Annotated[str, StringConstraints(pattern=CHANNEL)] | None = None
    logs: list[InlineLog] = Field(default_factory=list, max_length=10_000)
    log_paths: list[Annotated[str, StringConstraints(min_length=1, max_length=4096)]] = Field(
        default_factory=list, max_length=10_000
    )
    diagnosis: PrecomputedDiagnosis | None = None
    # Which shape it arrived as (generic, slurm, alertmanager, diagnosis): shown and audited, not trusted.
    received_as: Annotated[str, StringConstraints(max_length=32)] = "generic"

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        return _checked(lambda: names.job_token(value, "cluster name"))

    @field_validator("job_id")
    @classmethod
    def _job_id(cls, value: str) -> str:
        return _checked(lambda: names.job_id(value))

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, value: list[str]) -> list[str]:
        return _hosts(value)

    @field_validator("logs")
    @classmethod
    def _distinct_names(cls, value: list[InlineLog]) -> list[InlineLog]:
        names_seen = [log.name for log in value]
        twice = sorted({name for name in names_seen if names_seen.count(name) > 1})
        if twice:
            raise ValueError(f"two logs are named {twice[0]!r}: each inline log needs its own name")
        return value

    @field_validator("log_paths")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.startswith("/") or "\x00" in path:
                raise ValueError(f"log path {path[:200]!r} must be absolute")
        return value

    @property
    def key(self) -> str:
        return f"{self.cluster}/{self.job_id}/{self.attempt}"

    @property
    def inline_bytes(self) -> int:
        return sum(len(log.text.encode()) for log in self.logs)
