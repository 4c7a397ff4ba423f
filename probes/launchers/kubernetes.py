"""Run the probe as a Kubernetes Job pinned to one node (node affinity on kubernetes.io/hostname) with
its GPUs requested as `nvidia.com/gpu`. The manifest is built here as data and applied with
`kubectl apply -f -` (JSON is valid kubectl input); deploy/kubernetes/probe-job.yaml is the same Job
as a template for people who apply it by hand. Multi-node probes are not offered through Kubernetes:
probe nodes one at a time there, or use ssh/slurm.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from probes import progress
from probes.launchers.base import LaunchError, deadline_timeout, result_from_output, run_command
from probes.options import ProbeOptions
from probes.result import ProbeResult, failure

POLL_S = 2.0
KUBECTL_TIMEOUT_S = 30.0


@dataclass(slots=True)
class KubernetesConfig:
    namespace: str = "default"
    image: str = "ncclbot-probe:latest"  # an image with torch and this package installed
    gpus: int = 8
    kubectl: str = "kubectl"
    context: str | None = None
    service_account: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def job_name(node: str) -> str:
    """A DNS-1123 label: ncclbot-probe-<node>-<random>, at most 63 characters."""
    slug = re.sub(r"[^a-z0-9-]", "-", node.lower()).strip("-")[:36] or "node"
    return f"ncclbot-probe-{slug}-{secrets.token_hex(3)}"


def render_job(
    node: str, opts: ProbeOptions, config: KubernetesConfig, *, name: str | None = None
) -> dict[str, Any]:
    node_opts = dataclasses.replace(opts, json=True, nproc=opts.nproc or config.gpus or None)
    env = dict(config.env, NCCLBOT_PROBE_LAUNCHER="k8s")
    container: dict[str, Any] = {
        "name": "probe",
        "image": config.image,
        "command": ["python3", "-m", "probes.allreduce", *node_opts.to_argv()],
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        # NCCL needs a real /dev/shm, not the container runtime's 64 MiB default.
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if config.gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": config.gpus}}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                }
            }
        },
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }
    if config.service_account:
        pod_spec["serviceAccountName"] = config.service_account
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name or job_name(node),
            "namespace": config.namespace,
            "labels": {"app.kubernetes.io/name": "ncclbot-probe", "ncclbot/node": node[:63]},
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(opts.deadline + 120),
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "ncclbot-probe"}},
                "spec": pod_spec,
            },
        },
    }


def kubectl(config: KubernetesConfig, *args: str) -> list[str]:
    base = [config.kubectl]
    if config.context:
        base += ["--context", config.context]
    return [*base, "--namespace", config.namespace, *args]


def apply_argv(config: KubernetesConfig) -> list[str]:
    return kubectl(config, "apply", "-f", "-")


def status_argv(config: KubernetesConfig, name: str) -> list[str]:
    return kubectl(config, "get", "job", name, "-o", "json")


def logs_argv(config: KubernetesConfig, name: str) -> list[str]:
    return kubectl(config, "logs", f"job/{name}", "--all-containers")


def delete_argv(config: KubernetesConfig, name: str) -> list[str]:
    return kubectl(config, "delete", "job", name, "--wait=false", "--ignore-not-found")


def launch(
    hosts: list[str],
    opts: ProbeOptions,
    config: KubernetesConfig,
    *,
    on_progress: progress.ProgressCallback | None = None,
    timeout: float | None = None,
) -> ProbeResult:
    if len(hosts) != 1:
        raise LaunchError("the Kubernetes launcher probes one node at a time")
    node = hosts[0]
    limit = deadline_timeout(opts.deadline, timeout) + 120
    manifest = render_job(node, opts, config)
    name = manifest["metadata"]["name"]
    applied = run_command(apply_argv(config), timeout=KUBECTL_TIMEOUT_S, stdin_text=json.dumps(manifest))
    if applied.returncode != 0:
        return failure(f"kubectl apply failed: {applied.stderr.strip()[:300]}", host=node, launcher="k8s")
    if on_progress is not None:
        on_progress(f"job {name} created in namespace {config.namespace}")
    stop_at = time.monotonic() + limit
    finished = False
    try:
        while time.monotonic() < stop_at:
            state = run_command(status_argv(config, name), timeout=KUBECTL_TIMEOUT_S)
            if state.returncode == 0:
                try:
                    status = json.loads(state.stdout or "{}").get("status", {})
                except (json.JSONDecodeError, AttributeError):
                    status = {}
                if status.get("succeeded") or status.get("failed"):
                    finished = True
                    break
            time.sleep(POLL_S)
        logs = run_command(logs_argv(config, name), timeout=KUBECTL_TIMEOUT_S)
        tracker = progress.Tracker(on_progress)
        for line in logs.stdout.splitlines():
            tracker.feed(line)
        return result_from_output(
            logs.stdout,
            logs.stdout + logs.stderr,
            host=node,
            launcher="k8s",
            returncode=logs.returncode,
            timed_out=not finished,
            timeout=limit,
            tracker=tracker,
        )
    finally:
        run_command(delete_argv(config, name), timeout=KUBECTL_TIMEOUT_S)
