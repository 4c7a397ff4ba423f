"""The `kubernetes` job source: a PyTorchJob's or JobSet's failed pods and their containers' logs.

Pods are found by the labels the operators set (`training.kubeflow.org/job-name`,
`jobset.sigs.k8s.io/jobset-name`). A pod counts as failed when its phase is Failed or a container
ended with a non-zero exit code, now or before its last restart (then the logs of the previous
container are the interesting ones). Logs are written into the scratch folder, capped per container.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.jobs import names
from bot.jobs.k8s.client import REQUEST_TIMEOUT_S, api_error, core_api
from bot.jobs.model import FetchedJob, JobError, JobInfo, JobNotFound, JobRef
from bot.settings import Settings

# PyTorchJob, JobSet, and a batch Job (a JobSet's child job, as kube-state-metrics' job_name names it).
JOB_LABELS = (
    "training.kubeflow.org/job-name",
    "jobset.sigs.k8s.io/jobset-name",
    "batch.kubernetes.io/job-name",
)
RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"
MAX_LOG_BYTES = 256 * 1024 * 1024


def _safe(name: str) -> str:
    """API-provided names as path parts: DNS names already, but never a separator or `..`."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".")
    return cleaned or "_"


@dataclass(frozen=True, slots=True)
class ContainerLog:
    pod: str
    container: str
    previous: bool
    exit_code: int | None
    node: str | None


def _terminated_code(state: Any) -> int | None:
    terminated = getattr(state, "terminated", None) if state is not None else None
    return getattr(terminated, "exit_code", None) if terminated is not None else None


def failed_containers(pod: Any) -> list[ContainerLog]:
    """The containers of `pod` whose logs tell why it failed (current or previous instance)."""
    found = []
    node = pod.spec.node_name if pod.spec is not None else None
    for status in pod.status.container_statuses or []:
        now, before = _terminated_code(status.state), _terminated_code(status.last_state)
        if now is not None and now != 0:
            found.append(ContainerLog(pod.metadata.name, status.name, False, now, node))
        if before is not None and before != 0:
            found.append(ContainerLog(pod.metadata.name, status.name, True, before, node))
    if not found and pod.status.phase == "Failed":
        found = [ContainerLog(pod.metadata.name, c.name, False, None, node) for c in pod.spec.containers]
    return found


@dataclass
class KubernetesSource:
    api: Any  # kubernetes.client.CoreV1Api
    namespace: str = "default"
    max_log_bytes: int = MAX_LOG_BYTES
    kind = "kubernetes"

    @classmethod
    def from_settings(cls, settings: Settings) -> KubernetesSource:
        return cls(api=core_api(settings), namespace=settings.kubernetes_namespace)

    def fetch(self, ref: JobRef, scratch: Path) -> FetchedJob:
        namespace, name = self._names(ref.job_id)
        pods = self._pods(namespace, name)
        chosen = [c for pod in pods for c in failed_containers(pod)]
        if not chosen:
            raise JobNotFound(
                f"job {namespace}/{name}: none of its {len(pods)} pods failed (or their logs are gone)"
            )
        paths = [self._write_log(namespace, log, scratch) for log in chosen]
        restarts = [
            int(p.metadata.labels.get(RESTART_LABEL, 0))
            for p in pods
            if (p.metadata.labels or {}).get(RESTART_LABEL, "0").isdigit()
        ]
        first = next((c for c in chosen if c.exit_code), chosen[0])
        info = JobInfo(
            job_id=ref.job_id,
            source=self.kind,
            cluster=ref.cluster,
            name=name,
            state="FAILED",
            exit_code=str(first.exit_code) if first.exit_code is not None else None,
            nodes=tuple(dict.fromkeys(c.node for c in chosen if c.node)),
            attempt=max(restarts, default=0),
            log_paths=tuple(str(p) for p in paths),
        )
        return FetchedJob(info=info, paths=tuple(paths))

    def _names(self, job_id: str) -> tuple[str, str]:
        namespace, _, name = job_id.rpartition("/")
        return (
            names.kubernetes_name(namespace or self.namespace, "namespace"),
            names.kubernetes_name(name, "job name"),
        )

    def _pods(self, namespace: str, name: str) -> list[Any]:
        for label in JOB_LABELS:
            try:
                listed = self.api.list_namespaced_pod(
                    namespace, label_selector=f"{label}={name}", _request_timeout=REQUEST_TIMEOUT_S
                )
            except Exception as error:  # ApiException, urllib3 errors: one line either way
                raise JobError(f"listing the pods of {namespace}/{name} failed: {api_error(error)}") from None
            if listed.items:
                return list(listed.items)
        raise JobNotFound(f"no pods of a PyTorchJob, JobSet or Job named {name} in namespace {namespace}")

    def _write_log(self, namespace: str, log: ContainerLog, scratch: Path) -> Path:
        try:
            response = self.api.read_namespaced_pod_log(
                log.pod,
                namespace,
                container=log.container,
                previous=log.previous,
                limit_bytes=self.max_log_bytes,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT_S,
            )
        except Exception as error:
            raise JobError(
                f"reading the log of {log.pod}/{log.container} failed: {api_error(error)}"
            ) from None
        # `<node>/<pod>__<container>.log`: the matcher reads the host from the folder, and the double
        # underscore keeps a pod name such as `...-worker-1` from being read as rank 1.
        suffix = "__previous" if log.previous else ""
        folder = scratch / _safe(log.node or "unscheduled")
        folder.mkdir(exist_ok=True)
        path = folder / f"{_safe(log.pod)}__{_safe(log.container)}{suffix}.log"
        with path.open("wb") as out:
            for chunk in response.stream(64 * 1024):
                out.write(chunk)
        response.release_conn()
        return path
