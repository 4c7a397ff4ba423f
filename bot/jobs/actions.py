"""One protocol for the cluster actions (drain, resume, requeue away from a node), and the registry
that picks the implementation per cluster: `slurm` (scontrol) or `kubernetes` (cordon + taint).

Implementations validate names, build the exact commands or API calls, and in dry-run mode return
them without running anything. Permission checks and the audit trail are the caller's
(bot.services.cluster_actions), so that every front end gets the same ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from bot.jobs.model import ActionOutcome, JobError
from bot.jobs.slurm.actions import SlurmActions
from bot.jobs.slurm.commands import SlurmCommands
from bot.jobs.sources import kind_for
from bot.settings import Settings

NO_ACTIONS = "none"


class ClusterActions(Protocol):
    kind: str

    def drain(self, host: str, reason: str, *, dry_run: bool) -> ActionOutcome: ...

    def resume(self, host: str, *, dry_run: bool) -> ActionOutcome: ...

    def requeue(self, job_id: str, *, exclude: list[str], dry_run: bool) -> ActionOutcome: ...


def _slurm(settings: Settings) -> ClusterActions:
    return SlurmActions(commands=SlurmCommands(bin_dir=settings.slurm_bin_dir))


def _kubernetes(settings: Settings) -> ClusterActions:
    from bot.jobs.k8s.actions import KubernetesActions  # the kubernetes client is an optional extra

    return KubernetesActions.from_settings(settings)


ACTIONS: dict[str, Callable[[Settings], ClusterActions]] = {"slurm": _slurm, "kubernetes": _kubernetes}


def actions_for(settings: Settings, cluster: str | None) -> ClusterActions:
    """The configured actions, else those of the cluster's job source kind when it has any."""
    kind = kind_for(settings.cluster_actions, cluster) or kind_for(settings.job_sources, cluster)
    factory = ACTIONS.get(kind or NO_ACTIONS)
    if factory is None:
        why = f" (a {kind} job source has none)" if kind not in (None, NO_ACTIONS) else ""
        raise JobError(
            f"no cluster actions for cluster {cluster or '(none)'}{why}: set NCCLBOT_CLUSTER_ACTIONS"
        )
    return factory(settings)
