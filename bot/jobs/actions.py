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
    if (
        kind is None
        or kind == NO_ACTIONS
        or (kind not in ACTIONS and kind_for(settings.cluster_actions, cluster) is None)
    ):
        raise JobError(
            f"no cluster actions configured for cluster {cluster or '(none)'} (NCCLBOT_CLUSTER_ACTIONS)"
        )
    factory = ACTIONS.get(kind)
    if factory is None:
        raise JobError(f"unknown cluster actions {kind!r}; known: {', '.join(sorted(ACTIONS))}, {NO_ACTIONS}")
    return factory(settings)
