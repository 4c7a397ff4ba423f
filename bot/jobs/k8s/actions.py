"""Kubernetes' cluster actions: cordon a node and taint it NoSchedule (with the reason in an
annotation), and the reverse. Running pods are not evicted: a job's own failure policy restarts it,
and the taint keeps the new pods off the node. There is no requeue: PyTorchJob and JobSet restart
through their own policies, so asking for one says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot.jobs import names
from bot.jobs.k8s.client import REQUEST_TIMEOUT_S, api_error, core_api
from bot.jobs.model import ActionError, ActionOutcome
from bot.settings import Settings

TAINT_KEY = "ncclbot.io/unhealthy"
REASON_ANNOTATION = "ncclbot.io/drain-reason"
MERGE_PATCH = "application/merge-patch+json"


def taint_value(reason: str) -> str:
    """A label-value-safe summary of the reason: `incident-12` when it names one, else `drained`."""
    found = re.search(r"#(\d+)", reason)
    return f"incident-{found.group(1)}" if found else "drained"


@dataclass
class KubernetesActions:
    api: Any  # kubernetes.client.CoreV1Api
    kind = "kubernetes"

    @classmethod
    def from_settings(cls, settings: Settings) -> KubernetesActions:
        return cls(api=core_api(settings))

    def drain(self, host: str, reason: str, *, dry_run: bool) -> ActionOutcome:
        node = names.host(host)
        taint = {"key": TAINT_KEY, "value": taint_value(reason), "effect": "NoSchedule"}
        steps = (
            f"PATCH /api/v1/nodes/{node}: spec.unschedulable=true (cordon)",
            f"PATCH /api/v1/nodes/{node}: add taint {TAINT_KEY}={taint['value']}:NoSchedule, "
            f"annotation {REASON_ANNOTATION}",
        )
        if dry_run:
            return ActionOutcome("drain", node, True, steps, detail="dry run: nothing was changed")
        current = self._node(node)
        taints = [t for t in self._taints(current) if t.get("key") != TAINT_KEY] + [taint]
        annotations = {REASON_ANNOTATION: reason[:1000]}
        self._patch(
            node,
            current,
            {"spec": {"unschedulable": True, "taints": taints}, "metadata": {"annotations": annotations}},
        )
        return ActionOutcome("drain", node, False, steps)

    def resume(self, host: str, *, dry_run: bool) -> ActionOutcome:
        node = names.host(host)
        steps = (
            f"PATCH /api/v1/nodes/{node}: spec.unschedulable=false, remove taint {TAINT_KEY} and annotation",
        )
        if dry_run:
            return ActionOutcome("resume", node, True, steps, detail="dry run: nothing was changed")
        current = self._node(node)
        taints = [t for t in self._taints(current) if t.get("key") != TAINT_KEY]
        annotations = {REASON_ANNOTATION: None}
        self._patch(
            node,
            current,
            {
                "spec": {"unschedulable": None, "taints": taints or None},
                "metadata": {"annotations": annotations},
            },
        )
        return ActionOutcome("resume", node, False, steps)

    def requeue(self, job_id: str, *, exclude: list[str], dry_run: bool) -> ActionOutcome:
        raise ActionError(
            "requeue is not a Kubernetes action: PyTorchJob and JobSet restart by their own policy; "
            "drain the node (cordon + taint) and the restarted pods avoid it"
        )

    def _node(self, name: str) -> Any:
        try:
            return self.api.read_node(name, _request_timeout=REQUEST_TIMEOUT_S)
        except Exception as error:
            raise ActionError(f"reading node {name} failed: {api_error(error)}") from None

    @staticmethod
    def _taints(node: Any) -> list[dict[str, Any]]:
        return [
            {"key": t.key, "value": t.value, "effect": t.effect}
            for t in (node.spec.taints if node.spec is not None and node.spec.taints else [])
        ]

    def _patch(self, name: str, current: Any, patch: dict[str, Any]) -> None:
        # The resourceVersion makes the read-modify-write of the taint list safe: a concurrent change
        # gets 409 instead of being overwritten.
        patch["metadata"]["resourceVersion"] = current.metadata.resource_version
        try:
            self.api.patch_node(name, patch, _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT_S)
        except Exception as error:
            raise ActionError(f"patching node {name} failed: {api_error(error)}") from None
