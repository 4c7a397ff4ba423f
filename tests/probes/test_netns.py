"""The probe across two network-namespace "hosts" (node1 10.77.0.1, node2 10.77.0.2, joined by a veth
named eth0; each also has a docker0 bridge holding the same 172.17.0.1 that cannot reach the other),
as set up by .ci/services/netns.sh. One rank per host, Gloo on CPU, each side a real
`python -m probes.allreduce --nnodes 2` in its namespace with its own hostname (UTS namespace)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from probes.result import ProbeResult
from tests.conftest import need_service

from .helpers import ROOT, probe_env

pytestmark = pytest.mark.netns


def netns_prefix() -> str:
    available = (
        os.environ.get("NCCLBOT_TEST_NETNS") == "1"
        and os.geteuid() == 0
        and shutil.which("unshare") is not None
    )
    need_service(available, "no test network namespaces (source .ci/services/netns.sh as root)")
    return os.environ.get("NCCLBOT_TEST_NETNS_PREFIX", "ncclbot")


def run_two_hosts(tmp_path: Path, port: int, ifname: str, deadline: int) -> tuple[ProbeResult, list[str]]:
    prefix = netns_prefix()
    processes = []
    for node_rank in (0, 1):
        hostname = f"node{node_rank + 1}"
        argv = [
            "ip", "netns", "exec", f"{prefix}-h{node_rank + 1}",
            "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname,
            sys.executable, "-m", "probes.allreduce", "--json", "--nproc", "1",
            "--nnodes", "2", "--node-rank", str(node_rank), "--master-addr", "10.77.0.1",
            "--master-port", str(port), "--sizes", "8,4K", "--iters", "1", "--deadline", str(deadline),
        ]  # fmt: skip
        env = probe_env(tmp_path, GLOO_SOCKET_IFNAME=ifname)
        processes.append(
            subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outputs = [p.communicate(timeout=deadline + 30) for p in processes]
    lines = [line for line in outputs[0][0].splitlines() if line.startswith("{")]
    assert lines, f"node1 printed no result: {outputs[0][1][-3000:]}"
    return ProbeResult.from_dict(json.loads(lines[-1])), [err for _, err in outputs]


def test_probe_across_two_hosts_passes_on_the_right_interface(tmp_path: Path) -> None:
    result, _ = run_two_hosts(tmp_path, 29611, "eth0", deadline=40)
    assert result.verdict == "healthy", result.reasons
    assert result.hosts == ["node1", "node2"]
    assert result.world_size == 2 and all(size.correct for size in result.results)
    interfaces = [c for c in result.checks if c.name == "interfaces"]
    assert {c.host for c in interfaces} == {"node1", "node2"}
    assert all(c.status == "pass" and "Gloo would use eth0" in c.evidence for c in interfaces)


def test_gloo_forced_onto_docker0_fails_and_the_check_names_interface_shadowing(tmp_path: Path) -> None:
    result, _ = run_two_hosts(tmp_path, 29612, "docker0", deadline=10)
    assert result.verdict == "failed"
    shadowing = [r for r in result.reasons if "interface shadowing: GLOO_SOCKET_IFNAME=docker0" in r]
    assert shadowing, result.reasons
    assert any(r.startswith("rank ") and ("failed" in r or "did not finish" in r) for r in result.reasons)
    assert not result.results or not all(size.correct for size in result.results)
