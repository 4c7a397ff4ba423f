"""A failed job, reported by a scheduler hook: find its logs, diagnose, record, post once.

Where the diagnosis comes from, first that applies: a pre-computed one (made next to the logs), inline
logs, log paths the bot can read (only under NCCLBOT_WEBHOOK_LOG_ROOTS), else the job source of the
job's cluster (Slurm's scontrol/sacct, a log directory, Kubernetes pods). A job whose logs cannot be
had is still posted, saying why: the on-call engineer learns that it failed either way.

A diagnosis is published like a Slack upload's (bot.services.publish: one top-level message per
incident naming the job, edited in place; a repeat of the fingerprint in its thread). Exactly once:
every post carries an idempotency key, and the event's own key `job-failed/<cluster>/<job>/<attempt>`
is recorded with the message, so a retried or re-sent event, or one taken over after a crash, finds it.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import runbooks
from bot.jobs.model import JobError, JobNotFound, JobRef
from bot.render import job_failure as render
from bot.services.bundles import bundle_root, fetched_files, keep, keep_references
from bot.services.diagnose import DiagnosisOutcome, DiagnosisRequest, diagnose_and_record, record_diagnosis
from bot.services.job_logs import fetch_job_logs
from bot.services.outlet import Message, Outlet
from bot.services.posting import post_once
from bot.services.publish import publish_diagnosis
from bot.services.scratch import empty_folder
from bot.services.worker import PermanentError
from bot.settings import Settings
from bot.store import Store
from matcher.model import Diagnosis, InputError

log = logging.getLogger("ncclbot.services.job_failure")

KIND = "job-failed"
# Lookups that fail for a reason that may pass (slurmctld restarting) are retried this many times
# before the job is posted without a diagnosis.
SOURCE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class JobFailure:
    """One failed job, as every payload shape becomes it (bot.webhook converts)."""

    cluster: str
    job_id: str
    attempt: int = 0
    state: str | None = None
    exit_code: int | None = None
    nodes: tuple[str, ...] = ()
    user: str | None = None
    job_name: str | None = None
    channel: str | None = None
    logs: tuple[tuple[str, str], ...] = ()  # inline (file name, text)
    log_paths: tuple[str, ...] = ()
    diagnosis: Diagnosis | None = None
    diagnosis_digest: str | None = None

    @property
    def key(self) -> str:
        return f"{KIND}/{self.cluster}/{self.job_id}/{self.attempt}"


@dataclass(frozen=True, slots=True)
class Diagnosed:
    outcome: DiagnosisOutcome | None
    problem: str | None
    nodes: tuple[str, ...] = ()
    job_name: str | None = None


@contextmanager
def scratch_for(key: str, what: str) -> Iterator[str]:
    """An empty folder for one event's logs, the same for every attempt at the same event: the files keep
    their paths, so a retry after a crash is recognised as the same input (stored once, not counted as a
    repeat of itself). Removed afterwards."""
    folder = empty_folder(None, what, key)
    try:
        yield str(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def under_roots(path: str, roots: list[Path]) -> bool:
    """True when `path`, links resolved, lies inside one of `roots` (links cannot lead out)."""
    real = Path(os.path.realpath(path))
    return any(real == root or root in real.parents for root in (Path(os.path.realpath(r)) for r in roots))


class JobFailureService:
    def __init__(self, settings: Settings, store: Store, outlet: Outlet) -> None:
        self.settings = settings
        self.store = store
        self.outlet = outlet

    def process(self, failure: JobFailure, *, tries: int = 1) -> dict[str, Any]:
        """Diagnose and post `failure`; the queue's result. `tries`: how often this event was claimed."""
        earlier = self.store.message_for_key(failure.key)
        if earlier is not None:
            return {"channel": earlier.channel, "ts": earlier.ts, "already_posted": True}
        channel = failure.channel or self.settings.default_channel
        if not channel:
            raise PermanentError(
                "no channel to post to: the event names none and NCCLBOT_DEFAULT_CHANNEL is unset"
            )
        diagnosed = self._diagnose(failure, final=tries >= SOURCE_ATTEMPTS)
        outcome = diagnosed.outcome
        if outcome is not None:
            # The same publication as a Slack upload: one message per incident naming the job, details
            # in its thread, a repeat of the fingerprint as a reply (bot.services.publish).
            published = publish_diagnosis(self.outlet, self.store, channel, outcome, job=failure.job_id)
            ref = self.store.remember_message(failure.key, published.message.channel, published.message.ts)
            incident = outcome.incident.id if outcome.incident is not None else None
            return {"channel": ref.channel, "ts": ref.ts, "class": outcome.diagnosis.primary.class_id,
                    "incident": incident, "repeat": published.repeat}  # fmt: skip
        view = self._view(failure, diagnosed)
        message = Message(text=render.text(view), blocks=tuple(render.blocks(view)))
        posted = post_once(self.outlet, self.store, failure.key, channel, message)
        return {"channel": posted.channel, "ts": posted.ts, "class": None, "problem": diagnosed.problem}

    # -- diagnosis ------------------------------------------------------------------------------------

    def _diagnose(self, failure: JobFailure, *, final: bool) -> Diagnosed:
        if failure.diagnosis is not None:
            return Diagnosed(self._precomputed(failure, failure.diagnosis), None)
        if failure.logs:
            with scratch_for(failure.key, "webhook") as scratch:
                paths = []
                for name, content in failure.logs:
                    target = Path(scratch) / name
                    target.write_text(content, encoding="utf-8", errors="replace")  # lone surrogates
                    paths.append(str(target))
                return self._read(failure, paths, written_into=Path(scratch))
        if failure.log_paths:
            allowed = [p for p in failure.log_paths if under_roots(p, self.settings.webhook_log_roots)]
            refused = [p for p in failure.log_paths if p not in allowed]
            if allowed:
                return self._read(failure, allowed)
            log.warning("log paths outside NCCLBOT_WEBHOOK_LOG_ROOTS ignored: %s", ", ".join(refused)[:500])
        return self._from_source(failure, final=final)

    def _from_source(self, failure: JobFailure, *, final: bool) -> Diagnosed:
        ref = JobRef(failure.job_id, failure.cluster)
        with scratch_for(failure.key, "job") as scratch:
            try:
                fetched = fetch_job_logs(self.settings, ref, Path(scratch))
            except JobNotFound as error:
                return Diagnosed(None, f"logs not found: {error}")
            except JobError as error:
                if not final:
                    raise  # perhaps passing (scheduler restarting): the queue retries with backoff
                return Diagnosed(None, f"logs could not be read: {error}")
            wrote = any(Path(scratch).iterdir())  # pod logs fetched here, not a job's own files
            diagnosed = self._read(
                failure, [str(p) for p in fetched.paths], written_into=Path(scratch) if wrote else None
            )
            return Diagnosed(diagnosed.outcome, diagnosed.problem, fetched.info.nodes, fetched.info.name)

    def _read(self, failure: JobFailure, paths: list[str], *, written_into: Path | None = None) -> Diagnosed:
        """Diagnose `paths` and keep them with the incident, so that files posted later in its thread
        are read with them: copies of what the bot wrote into `written_into` (removed afterwards),
        references to a job's own files."""
        try:
            outcome = diagnose_and_record(
                DiagnosisRequest(
                    paths=paths,
                    source="webhook",
                    job_id=failure.job_id,
                    cluster=failure.cluster,
                    database_url=self.settings.database_url,
                    raise_store_outage=True,  # retried once the database is back, never posted unstored
                )
            )
        except InputError as error:
            return Diagnosed(None, f"logs unusable: {error}")
        record = outcome.incident
        if record is not None and written_into is not None:
            keep(
                self.store,
                bundle_root(self.settings),
                record.id,
                fetched_files(written_into, paths, origin=f"webhook:{failure.key}"),
                cap_bytes=self.settings.bundle_keep_bytes,
                occurrence_id=record.occurrence_id,
            )
        elif record is not None:
            keep_references(self.store, record.id, paths, occurrence_id=record.occurrence_id)
        return Diagnosed(outcome, None)

    def _precomputed(self, failure: JobFailure, diagnosis: Diagnosis) -> DiagnosisOutcome:
        runbook = runbooks.render_for(diagnosis.primary.class_id, diagnosis.facts)
        digest = failure.diagnosis_digest or f"precomputed:{failure.key}"
        incident, warning = record_diagnosis(
            diagnosis,
            digest,
            source="webhook",
            job_id=failure.job_id,
            cluster=failure.cluster,
            database_url=self.settings.database_url,
            raise_outage=True,
        )
        return DiagnosisOutcome(diagnosis, runbook, digest, incident=incident, store_warning=warning)

    # -- message --------------------------------------------------------------------------------------

    def _view(self, failure: JobFailure, diagnosed: Diagnosed) -> render.JobFailureView:
        """The message of a job that could not be diagnosed (`diagnosed.problem` says why)."""
        return render.JobFailureView(
            cluster=failure.cluster,
            job_id=failure.job_id,
            attempt=failure.attempt,
            state=failure.state,
            exit_code=failure.exit_code,
            job_name=failure.job_name or diagnosed.job_name,
            user=failure.user,
            nodes=failure.nodes or diagnosed.nodes,
            problem=diagnosed.problem,
        )
