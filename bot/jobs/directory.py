"""The `directory` job source: logs kept in a folder named after the job, e.g. `/logs/{cluster}/{job_id}/`."""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path

from bot.jobs import names
from bot.jobs.model import FetchedJob, JobError, JobInfo, JobNotFound, JobRef

TEMPLATE_FIELDS = frozenset({"cluster", "job_id"})


def check_template(template: str) -> str:
    """A template names only {cluster} and {job_id}, and at least {job_id}."""
    try:
        used = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as error:
        raise JobError(f"job log template {template!r}: {error}") from None
    unknown = used - TEMPLATE_FIELDS
    if unknown:
        raise JobError(f"job log template {template!r}: unknown field(s) {', '.join(sorted(unknown))}")
    if "job_id" not in used:
        raise JobError(f"job log template {template!r} must contain {{job_id}}")
    return template


@dataclass(frozen=True)
class DirectorySource:
    template: str
    kind = "directory"

    def fetch(self, ref: JobRef, scratch: Path) -> FetchedJob:
        template = check_template(self.template)
        job_id = names.job_token(ref.job_id)
        if "{cluster}" in template and ref.cluster is None:
            raise JobError(f"the job log template {template} needs a cluster: give one (--cluster)")
        cluster = names.job_token(ref.cluster, "cluster name") if ref.cluster is not None else ""
        path = Path(template.format(cluster=cluster, job_id=job_id))
        if not path.exists():
            raise JobNotFound(f"no logs for job {job_id} at {path}")
        info = JobInfo(job_id=job_id, source=self.kind, cluster=ref.cluster, log_paths=(str(path),))
        return FetchedJob(info=info, paths=(path,))
