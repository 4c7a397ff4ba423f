"""What the chat front end needs from the cluster, as two small protocols: fetching a job's logs
(`/nccl diagnose <job-id>`) and acting on a node (the Drain button).

Their implementations live in `bot.jobs` (Slurm, Kubernetes, a log directory); that package offers
`job_sources(settings)` and `cluster_actions(settings)`. Until it does, or when nothing is configured,
these lookups answer None and the front end says so instead of failing.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.settings import Settings

log = logging.getLogger("ncclbot.services.hooks")

JOBS_PACKAGE = "bot.jobs"


class JobNotFound(LookupError):
    """The job is unknown to every source, or its logs are gone; `str()` is one line for a person."""


@dataclass(frozen=True, slots=True)
class JobLogs:
    """Where a job's logs are, as local paths the matcher can read, and what is known about the job."""

    job_id: str
    paths: tuple[str, ...]
    cluster: str | None = None
    name: str | None = None
    nodes: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


class JobSources(Protocol):
    def fetch(self, job_id: str, cluster: str | None) -> JobLogs:
        """The job's logs; raises JobNotFound (one-line reason) when no source knows the job."""
        ...


@dataclass(frozen=True, slots=True)
class ActionResult:
    ok: bool
    message: str  # one line for the person who pressed the button


class ClusterActions(Protocol):
    def drain(self, node: str, *, reason: str, cluster: str | None, actor: str) -> ActionResult:
        """Take `node` out of scheduling (Slurm DRAIN, Kubernetes cordon + taint)."""
        ...


def _provider(name: str, settings: Settings) -> Any | None:
    try:
        module = importlib.import_module(JOBS_PACKAGE)
    except ModuleNotFoundError as error:
        if error.name is not None and JOBS_PACKAGE.startswith(error.name):
            return None  # the jobs package is not part of this build
        raise
    factory = getattr(module, name, None)
    if factory is None:
        return None
    try:
        return factory(settings)
    except Exception:  # a misconfigured source must not take the whole front end down
        log.exception("%s.%s failed", JOBS_PACKAGE, name)
        return None


def job_sources(settings: Settings) -> JobSources | None:
    provider: JobSources | None = _provider("job_sources", settings)
    return provider


def cluster_actions(settings: Settings) -> ClusterActions | None:
    provider: ClusterActions | None = _provider("cluster_actions", settings)
    return provider
