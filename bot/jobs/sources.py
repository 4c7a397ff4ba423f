"""One protocol for every job source, and the registry that picks one per cluster from the settings.

A source turns a job id into a `FetchedJob`: the job's metadata and local paths to diagnose (files the
scheduler wrote, or logs it fetched into `scratch`). Adding a source is one class and one registry line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from bot.jobs.directory import DirectorySource
from bot.jobs.model import FetchedJob, JobError, JobRef
from bot.jobs.slurm.commands import SlurmCommands
from bot.jobs.slurm.source import SlurmSource
from bot.settings import Settings

ANY_CLUSTER = "*"


class JobSource(Protocol):
    kind: str

    def fetch(self, ref: JobRef, scratch: Path) -> FetchedJob:
        """The job's metadata and logs; raises JobNotFound / JobError with a one-line reason."""
        ...


def _slurm(settings: Settings) -> JobSource:
    return SlurmSource(commands=SlurmCommands(bin_dir=settings.slurm_bin_dir))


def _directory(settings: Settings) -> JobSource:
    if not settings.job_log_template:
        raise JobError(
            "the directory job source needs NCCLBOT_JOB_LOG_TEMPLATE (e.g. /logs/{cluster}/{job_id}/)"
        )
    return DirectorySource(template=settings.job_log_template)


def _kubernetes(settings: Settings) -> JobSource:
    from bot.jobs.k8s.source import KubernetesSource  # the kubernetes client is an optional extra

    return KubernetesSource.from_settings(settings)


SOURCES: dict[str, Callable[[Settings], JobSource]] = {
    "slurm": _slurm,
    "directory": _directory,
    "kubernetes": _kubernetes,
}


def kind_for(mapping: dict[str, str], cluster: str | None) -> str | None:
    """The kind configured for `cluster`, else for any cluster (`*`), else None."""
    if cluster is not None and cluster in mapping:
        return mapping[cluster]
    return mapping.get(ANY_CLUSTER)


def source_for(settings: Settings, cluster: str | None) -> JobSource:
    kind = kind_for(settings.job_sources, cluster)
    if kind is None:
        raise JobError(f"no job source configured for cluster {cluster or '(none)'} (NCCLBOT_JOB_SOURCES)")
    factory = SOURCES.get(kind)
    if factory is None:
        raise JobError(f"unknown job source {kind!r}; known: {', '.join(sorted(SOURCES))}")
    return factory(settings)
