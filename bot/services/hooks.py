"""What the chat front end needs from the cluster, as two small protocols: fetching a job's logs
(`/nccl diagnose <job-id>`) and acting on a node (the Drain button).

Both are the configured job sources and cluster actions of `bot.jobs`, through the same use cases as
the CLI and the webhook (`bot.services.job_logs`, `bot.services.cluster_actions`: one permission
check, one audit trail). Where no cluster has actions, `cluster_actions` answers None and the front
end says Drain is not configured.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.exc import SQLAlchemyError

from bot.jobs.actions import ACTIONS
from bot.jobs.model import ActionOutcome, JobError, JobRef
from bot.jobs.sources import ANY_CLUSTER, kind_for
from bot.services.cluster_actions import Actor, ClusterActionService
from bot.services.job_logs import fetch_job_logs
from bot.services.scratch import empty_folder
from bot.settings import Settings
from bot.store import Store, StoreError
from bot.store.engine import database_error_reason

# The Slack app's admin middleware (AdminPolicy: listed users and user groups) gates the buttons that
# call these; the audit names it as what admitted the actor.
SLACK_POLICY = "slack admin policy"


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
    # A folder the bot fetched the logs into (Kubernetes pod logs), None when they are the job's own
    # files where they lie (Slurm, a log folder). Its files become copies in the incident's bundle,
    # within the bundle's size bound, and the folder is removed once the diagnosis is done.
    fetched_into: str | None = None


class JobSources(Protocol):
    def fetch(self, job_id: str, cluster: str | None, *, key: str = "") -> JobLogs:
        """The job's logs; raises JobNotFound (one-line reason) when no source knows the job. `key`
        names the request: logs fetched again for the same one (a retry) go to the same place."""
        ...


@dataclass(frozen=True, slots=True)
class ActionResult:
    ok: bool
    message: str  # one line for the person who pressed the button


class ClusterActions(Protocol):
    def drain(self, node: str, *, reason: str, cluster: str | None, actor: str) -> ActionResult:
        """Take `node` out of scheduling (Slurm DRAIN, Kubernetes cordon + taint)."""
        ...

    def requeue(self, job_id: str, *, exclude: list[str], cluster: str | None, actor: str) -> ActionResult:
        """Requeue `job_id` away from the `exclude` nodes (Slurm ExcNodeList + requeue)."""
        ...


class ConfiguredJobSources:
    """The job source of each cluster (NCCLBOT_JOB_SOURCES). Fetched logs (Kubernetes pods) are written
    under NCCLBOT_SPOOL_DIR (else the temporary directory), one folder per fetch."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def fetch(self, job_id: str, cluster: str | None, *, key: str = "") -> JobLogs:
        scratch = empty_folder(self.settings.spool_dir, "job", key)
        try:
            fetched = fetch_job_logs(self.settings, JobRef(job_id, cluster), scratch)
        except JobError as error:
            shutil.rmtree(scratch, ignore_errors=True)  # what a failed fetch wrote before it failed
            raise JobNotFound(str(error)) from None
        wrote = any(scratch.iterdir())
        if not wrote:
            scratch.rmdir()  # the source pointed at files where they are (Slurm, a log folder)
        info = fetched.info
        return JobLogs(
            job_id=info.job_id,
            paths=tuple(str(path) for path in fetched.paths),
            cluster=cluster,
            name=info.name,
            nodes=info.nodes,
            extra={
                "state": info.state,
                "exit_code": info.exit_code,
                "source": info.source,
                "notes": list(info.notes),
            },
            fetched_into=str(scratch) if wrote else None,
        )


class ConfiguredClusterActions:
    """Drain and requeue through bot.services.cluster_actions (audited there, with the commands run)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def drain(self, node: str, *, reason: str, cluster: str | None, actor: str) -> ActionResult:
        return self._act(lambda service, who: service.drain(who, node, reason=reason, cluster=cluster), actor)

    def requeue(self, job_id: str, *, exclude: list[str], cluster: str | None, actor: str) -> ActionResult:
        return self._act(
            lambda service, who: service.requeue(who, job_id, exclude=exclude, cluster=cluster), actor
        )

    def _act(self, act: Any, actor: str) -> ActionResult:
        who = Actor(id=actor, via="slack", admitted_by=SLACK_POLICY)
        try:
            with Store.open(self.settings.database_url) as store:
                outcome: ActionOutcome = act(ClusterActionService(self.settings, store), who)
        except JobError as error:
            return ActionResult(ok=False, message=str(error))
        except (StoreError, SQLAlchemyError) as error:  # actions are refused when they cannot be audited
            return ActionResult(
                ok=False, message=f"not done: the database is unavailable ({database_error_reason(error)})"
            )
        said = outcome.detail or "; ".join(outcome.steps)
        return ActionResult(ok=True, message=said)


def job_sources(settings: Settings) -> JobSources | None:
    return ConfiguredJobSources(settings)


def cluster_actions(settings: Settings) -> ClusterActions | None:
    """None when no cluster has actions (actions `none`, or every job source a log folder)."""
    clusters = {*settings.cluster_actions, *settings.job_sources}
    named = {None if cluster == ANY_CLUSTER else cluster for cluster in clusters}
    kinds = {kind_for(settings.cluster_actions, c) or kind_for(settings.job_sources, c) for c in named}
    if not kinds & set(ACTIONS):
        return None
    return ConfiguredClusterActions(settings)
