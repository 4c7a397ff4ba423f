"""Diagnose a job's logs and remember the result: the one use case behind `ncclbot diagnose`, a Slack
upload, a failed job's webhook and a thread that gains more files."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, Literal

import runbooks
from matcher.model import Diagnosis
from matcher.pipeline import diagnose
from matcher.reading.read import ReadLimits
from runbooks.model import RenderedRunbook

log = logging.getLogger("ncclbot.services.diagnose")

Source = Literal["cli", "slack", "webhook"]


@dataclass(frozen=True, slots=True)
class DiagnosisRequest:
    """What to read and how to file it. `paths` may contain '-' (then `stdin` is read)."""

    paths: Sequence[str]
    source: Source = "cli"
    job_id: str | None = None
    cluster: str | None = None
    store: bool = True
    database_url: str | None = None
    limits: ReadLimits = field(default_factory=ReadLimits)
    stdin: BinaryIO | None = None
    progress: Callable[[int], None] | None = None
    # Names to show instead of paths that mean nothing to the reader (a chat upload's spool file):
    # path -> name, applied to evidence sources before the diagnosis is shown or stored.
    display_names: Mapping[str, str] = field(default_factory=dict)
    # An occurrence this diagnosis replaces (its bundle re-run with more files): refined, not counted.
    refines: int | None = None
    # The server's front ends work from a durable queue: a database that cannot be reached is raised
    # (the task is retried once it is back) instead of becoming a warning beside an unstored diagnosis.
    raise_store_outage: bool = False


@dataclass(frozen=True, slots=True)
class DiagnosisOutcome:
    """A diagnosis with its filled runbook and, when stored, the incident it joined.

    `store_warning` says why a requested store did not happen: a database problem never hides the
    diagnosis itself."""

    diagnosis: Diagnosis
    runbook: RenderedRunbook
    input_digest: str
    incident: Any | None = None  # bot.store.IncidentRecord; typed loosely so --no-store never imports it
    store_warning: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The `ncclbot diagnose --json` document of DESIGN.md."""
        document = self.diagnosis.to_json()
        document["runbook"] = self.runbook.to_json()
        # For a guess: what would confirm each listed class (empty when the diagnosis is sure).
        document["to_settle"] = [s.to_json() for s in runbooks.settle_for(document["diagnoses"])]
        if self.incident is not None:
            document["incident"] = self.incident.to_json()
        return document


def diagnose_and_record(request: DiagnosisRequest) -> DiagnosisOutcome:
    """Read, diagnose, fill the runbook and (unless `store=False`) record the occurrence.

    Raises matcher.model.InputError for unusable input; store problems become `store_warning`."""
    result = diagnose(request.paths, limits=request.limits, stdin=request.stdin, progress=request.progress)
    diagnosis = renamed(result.diagnosis, request.display_names)
    _count(diagnosis, request.source)
    # From here on the diagnosis exists: a runbook or store problem is a warning, never a lost result.
    runbook = _filled_runbook(diagnosis)
    outcome = DiagnosisOutcome(diagnosis=diagnosis, runbook=runbook, input_digest=result.input_digest)
    if not request.store:
        return outcome
    incident, warning = record_diagnosis(
        diagnosis,
        result.input_digest,
        source=request.source,
        job_id=request.job_id,
        cluster=request.cluster,
        database_url=request.database_url,
        refines=request.refines,
        raise_outage=request.raise_store_outage,
    )
    if incident is not None and not incident.duplicate:
        record_unrecognised_lines(request, diagnosis, incident.occurrence_id)
    return DiagnosisOutcome(
        diagnosis=diagnosis,
        runbook=runbook,
        input_digest=result.input_digest,
        incident=incident,
        store_warning=warning,
    )


def record_unrecognised_lines(request: DiagnosisRequest, diagnosis: Diagnosis, occurrence_id: int) -> None:
    """Feed the residue miner (bot.services.residue) with an unknown or low-confidence diagnosis's
    unrecognised lines. A bounded second look at the inputs; its failure never costs the diagnosis."""
    from bot.services import residue

    if not residue.should_mine(diagnosis):
        return
    try:
        from datetime import UTC, datetime

        from bot.store import Store

        with Store.open(request.database_url) as store:
            residue.record_residue(
                store, occurrence_id, request.paths, at=datetime.now(UTC), limits=request.limits
            )
    except Exception as error:  # the residue is a by-product: log it and move on
        from bot.store.engine import database_error_reason  # one line, credentials masked

        log.warning("unrecognised lines not mined: %s", database_error_reason(error))


def _count(diagnosis: Diagnosis, source: str) -> None:
    from bot.metrics import BYTES_READ, DIAGNOSES, DIAGNOSIS_SECONDS

    DIAGNOSES.labels(class_id=diagnosis.primary.class_id, source=source).inc()
    DIAGNOSIS_SECONDS.observe(diagnosis.stats.seconds)
    BYTES_READ.inc(diagnosis.stats.bytes)


def renamed(diagnosis: Diagnosis, names: Mapping[str, str]) -> Diagnosis:
    """`diagnosis` with each path of `names` replaced by its name in evidence sources (archive members
    `path!member` included) and in the culprit's reason."""
    if not names:
        return diagnosis
    ordered = sorted(names.items(), key=lambda item: -len(item[0]))  # longest first: no partial match

    def name(text: str) -> str:
        for path, shown in ordered:
            text = text.replace(path, shown)
        return text

    scores = tuple(
        replace(score, evidence=tuple(replace(e, source=name(e.source)) for e in score.evidence))
        for score in diagnosis.diagnoses
    )
    culprit = diagnosis.culprit
    if culprit is not None:
        culprit = replace(culprit, reason=name(culprit.reason))
    return replace(diagnosis, diagnoses=scores, culprit=culprit)


def _filled_runbook(diagnosis: Diagnosis) -> RenderedRunbook:
    """The class' runbook with this diagnosis' values; values come from logs, so if filling them ever
    fails the runbook comes with neutral wording instead, and a warning."""
    try:
        return runbooks.render_for(diagnosis.primary.class_id, diagnosis.facts)
    except Exception as error:
        log.warning("runbook filled without this diagnosis' values: %s: %s", type(error).__name__, error)
        return runbooks.render_for(diagnosis.primary.class_id, {})


def record_diagnosis(
    diagnosis: Diagnosis,
    input_digest: str,
    *,
    source: Source,
    job_id: str | None = None,
    cluster: str | None = None,
    database_url: str | None = None,
    refines: int | None = None,
    raise_outage: bool = False,
) -> tuple[Any | None, str | None]:
    """Store one diagnosis (or, with `refines`, replace that occurrence's); returns (IncidentRecord,
    None) or (None, why it was not stored).

    Whatever goes wrong with the database (a data directory that cannot be created, a driver that is not
    installed, a URL it cannot parse, a value it refuses, a corrupt file) must not hide the diagnosis, so
    every error becomes the warning (its reason is one line, credentials masked), except, with
    `raise_outage`, a database that cannot be reached (raised: the caller retries)."""
    from sqlalchemy.exc import InterfaceError, OperationalError

    from bot.store import Store
    from bot.store.engine import database_error_reason

    try:
        with Store.open(database_url) as store:
            if refines is not None:
                return store.refine_occurrence(refines, diagnosis, input_digest=input_digest), None
            record = store.record_diagnosis(
                diagnosis, source=source, job_id=job_id, cluster=cluster, input_digest=input_digest
            )
            return record, None
    except Exception as error:
        if raise_outage and isinstance(error, (OperationalError, InterfaceError)):
            raise
        reason = f"diagnosis not stored: {database_error_reason(error)}"
        log.warning("%s", reason)
        return None, reason
