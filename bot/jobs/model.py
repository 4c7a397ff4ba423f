"""Plain data across the job sources and cluster actions: what was asked, what was found, what was done."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class JobError(Exception):
    """A job or node request that cannot be served; `str()` is one line fit for a user."""


class JobNotFound(JobError):
    """The source does not know this job (never existed, or its records are gone)."""


class ActionError(JobError):
    """A cluster action was refused or failed (the scheduler's own message included)."""


@dataclass(frozen=True, slots=True)
class JobRef:
    """A job as named by a person or a scheduler hook: its id, within a cluster."""

    job_id: str
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class JobInfo:
    """What a source knows about a job. `log_paths` are local files or folders to diagnose.

    `attempt` counts the job's restarts (Slurm's `Restarts`, a pod's restart count): a requeued job that
    fails again is a new event. `notes` say what could not be known exactly (a guessed log name)."""

    job_id: str
    source: str
    cluster: str | None = None
    name: str | None = None
    user: str | None = None
    state: str | None = None
    reason: str | None = None
    exit_code: str | None = None
    nodes: tuple[str, ...] = ()
    batch_host: str | None = None
    work_dir: str | None = None
    attempt: int = 0
    log_paths: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchedJob:
    """A job with logs ready to read: `paths` exist on this machine (in `scratch` for fetched logs)."""

    info: JobInfo
    paths: tuple[Path, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What a cluster action did (or, in dry-run mode, would do): the commands / API calls, in order."""

    action: str
    target: str
    dry_run: bool
    steps: tuple[str, ...]
    detail: str = ""
