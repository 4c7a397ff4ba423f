"""A job id -> its logs, through the job source configured for its cluster: what `ncclbot diagnose
--job-id`, `/nccl diagnose <job-id>` and a webhook without logs all call."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bot.jobs.model import FetchedJob, JobRef
from bot.jobs.sources import source_for
from bot.services.diagnose import DiagnosisOutcome, DiagnosisRequest, Source, diagnose_and_record
from bot.settings import Settings


def fetch_job_logs(settings: Settings, ref: JobRef, scratch: Path) -> FetchedJob:
    """Raises bot.jobs.model.JobError (JobNotFound included) with a one-line reason."""
    return source_for(settings, ref.cluster).fetch(ref, scratch)


def diagnose_job(
    settings: Settings, ref: JobRef, *, source: Source, store: bool = True
) -> tuple[FetchedJob, DiagnosisOutcome]:
    """Fetch a job's logs and diagnose them, recorded under the job id and cluster."""
    with tempfile.TemporaryDirectory(prefix="ncclbot-job-") as scratch:
        fetched = fetch_job_logs(settings, ref, Path(scratch))
        outcome = diagnose_and_record(
            DiagnosisRequest(
                paths=[str(path) for path in fetched.paths],
                source=source,
                job_id=ref.job_id,
                cluster=ref.cluster,
                store=store,
                database_url=settings.database_url,
            )
        )
    return fetched, outcome
