"""Recovery actions on the cluster — drain a node, resume it, requeue a job away from it — with the
permission check and the audit trail in one place, so that the CLI and the Slack buttons (Drain,
Requeue) get the same ones.

Who may act: Slack users and user groups listed in NCCLBOT_ADMIN_USERS / NCCLBOT_ADMIN_GROUPS; the CLI
runs with its operator's own scheduler credentials, which the scheduler checks itself. Every attempt,
allowed or not, is written to the store's audit log with who, what, the commands and the outcome.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from bot.jobs.actions import ClusterActions, actions_for
from bot.jobs.model import ActionError, ActionOutcome, JobError
from bot.settings import Settings
from bot.store import Store, StoreError

Via = Literal["slack", "cli"]


class ActionDenied(JobError):
    """The actor may not do this (one line, fit for an ephemeral Slack reply)."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asks: a Slack user id (with the user groups the Slack side resolved), or a CLI operator.

    `admitted_by` names the front end's own permission check when it already ran one (the Slack app's
    admin middleware resolves user groups through Slack's API, which this layer cannot call)."""

    id: str
    via: Via
    groups: frozenset[str] = frozenset()
    admitted_by: str | None = None

    @classmethod
    def cli(cls) -> Actor:
        return cls(id=f"cli:{getpass.getuser()}", via="cli")


@dataclass
class ClusterActionService:
    settings: Settings
    store: Store
    actions: Callable[[Settings, str | None], ClusterActions] = actions_for
    dry_run: bool | None = None  # None: the NCCLBOT_CLUSTER_ACTIONS_DRY_RUN setting

    def allowed(self, actor: Actor) -> bool:
        if actor.via == "cli" or actor.admitted_by is not None:
            return True
        return actor.id in self.settings.admin_users or bool(actor.groups & set(self.settings.admin_groups))

    def drain(
        self,
        actor: Actor,
        host: str,
        *,
        reason: str | None = None,
        incident_id: int | None = None,
        cluster: str | None = None,
    ) -> ActionOutcome:
        """Drain `host`; the reason names the incident and its class (`ncclbot #12: network-ib-rdma`)."""
        text = self._reason(reason, incident_id)
        return self._act(
            actor,
            "node-drain",
            host,
            cluster,
            incident_id,
            {"reason": text},
            lambda actions, dry: actions.drain(host, text, dry_run=dry),
        )

    def resume(
        self, actor: Actor, host: str, *, incident_id: int | None = None, cluster: str | None = None
    ) -> ActionOutcome:
        return self._act(
            actor,
            "node-resume",
            host,
            cluster,
            incident_id,
            {},
            lambda actions, dry: actions.resume(host, dry_run=dry),
        )

    def requeue(
        self,
        actor: Actor,
        job_id: str,
        *,
        exclude: list[str],
        incident_id: int | None = None,
        cluster: str | None = None,
    ) -> ActionOutcome:
        """Requeue `job_id` so that it never lands on the `exclude` nodes again."""
        return self._act(
            actor,
            "job-requeue",
            job_id,
            cluster,
            incident_id,
            {"exclude": list(exclude)},
            lambda actions, dry: actions.requeue(job_id, exclude=list(exclude), dry_run=dry),
        )

    def _reason(self, reason: str | None, incident_id: int | None) -> str:
        given = (reason or "").strip()
        if incident_id is None:
            if given.startswith("ncclbot"):  # already says who (a front end built it)
                return given
            return f"ncclbot: {given}" if given else "ncclbot: drained by hand"
        try:
            incident = self.store.incident(incident_id)
        except StoreError as error:
            raise ActionError(f"cannot name the drain after incident {incident_id}: {error}") from None
        base = f"ncclbot #{incident.id}: {incident.class_id}"
        return f"{base}: {given}" if given else base

    def _act(
        self,
        actor: Actor,
        action: str,
        target: str,
        cluster: str | None,
        incident_id: int | None,
        detail: dict[str, object],
        run: Callable[[ClusterActions, bool], ActionOutcome],
    ) -> ActionOutcome:
        dry = self.settings.cluster_actions_dry_run if self.dry_run is None else self.dry_run
        record: dict[str, object] = {"target": target, "cluster": cluster, "via": actor.via, "dry_run": dry}
        if actor.admitted_by:
            record["admitted_by"] = actor.admitted_by
        record.update(detail)
        if not self.allowed(actor):
            self._audit(actor, action, incident_id, {**record, "outcome": "denied"})
            raise ActionDenied(
                f"{actor.id} may not {action.replace('-', ' ')}: not in NCCLBOT_ADMIN_USERS/GROUPS"
            )
        try:
            outcome = run(self.actions(self.settings, cluster), dry)
        except JobError as error:
            self._audit(actor, action, incident_id, {**record, "outcome": "failed", "error": str(error)})
            raise
        result = "dry-run" if outcome.dry_run else "done"
        self._audit(actor, action, incident_id, {**record, "outcome": result, "steps": list(outcome.steps)})
        return outcome

    def _audit(self, actor: Actor, action: str, incident_id: int | None, detail: dict[str, object]) -> None:
        self.store.audit(actor.id, action, incident_id=incident_id, detail=dict(detail))
