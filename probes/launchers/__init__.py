"""Launchers: run the probe on a node (local, ssh, slurm, kubernetes) and always get a ProbeResult back.

`launch(via, nodes, opts, ...)` is what the CLI and the Slack button call. Launchers run argument lists
(the ssh one quotes each argument for the remote shell, which ssh always goes through), validate node
names first, and turn every failure (unreachable, refused, timed out) into a failed result instead of an
exception. Stdlib only (asyncssh is imported by the ssh launcher when it is used); no torch needed here.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

from probes.launchers.base import LaunchError, validate_hosts
from probes.launchers.kubernetes import KubernetesConfig
from probes.launchers.slurm import SlurmConfig
from probes.launchers.ssh import SshConfig
from probes.options import ProbeOptions
from probes.progress import ProgressCallback
from probes.result import ProbeResult

VIAS = ("local", "ssh", "slurm", "k8s")

__all__ = ["VIAS", "KubernetesConfig", "LaunchError", "SlurmConfig", "SshConfig", "launch"]


def is_this_machine(host: str) -> bool:
    names = {socket.gethostname(), socket.getfqdn(), "localhost", "127.0.0.1", "::1"}
    return host in names or host.split(".")[0] == socket.gethostname().split(".")[0]


def launch(
    via: str,
    nodes: Sequence[str],
    opts: ProbeOptions,
    *,
    on_progress: ProgressCallback | None = None,
    timeout: float | None = None,
    ssh: SshConfig | None = None,
    slurm: SlurmConfig | None = None,
    k8s: KubernetesConfig | None = None,
) -> ProbeResult:
    """Probe `nodes` together through launcher `via`; raises LaunchError only for a request that cannot
    be attempted (bad node name, unsupported combination)."""
    hosts = validate_hosts(nodes)
    if via == "local":
        if len(hosts) > 1 or (hosts and not is_this_machine(hosts[0])):
            raise LaunchError(
                f"--via local probes this machine only ({socket.gethostname()}); name no other node"
            )
        from probes.launchers import local

        return local.launch(opts, on_progress=on_progress, timeout=timeout)
    if not hosts:
        raise LaunchError(f"--via {via} needs at least one node")
    if via == "ssh":
        from probes.launchers import ssh as ssh_launcher

        return ssh_launcher.launch(hosts, opts, ssh or SshConfig(), on_progress=on_progress, timeout=timeout)
    if via == "slurm":
        from probes.launchers import slurm as slurm_launcher

        return slurm_launcher.launch(
            hosts, opts, slurm or SlurmConfig(), on_progress=on_progress, timeout=timeout
        )
    if via == "k8s":
        from probes.launchers import kubernetes

        return kubernetes.launch(
            hosts, opts, k8s or KubernetesConfig(), on_progress=on_progress, timeout=timeout
        )
    raise LaunchError(f"unknown launcher {via!r}; choose one of {', '.join(VIAS)}")
