"""Launchers: node-name validation, argument lists, timeouts, and the local launcher for real."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
import yaml

from probes.launchers import KubernetesConfig, LaunchError, SlurmConfig, SshConfig, launch
from probes.launchers.base import result_from_output, run_command, validate_host
from probes.launchers.kubernetes import apply_argv, delete_argv, logs_argv, render_job, status_argv
from probes.launchers.slurm import srun_argv
from probes.launchers.ssh import remote_argv
from probes.options import ProbeOptions

from .helpers import ROOT, processes_with

DEPLOY_TEMPLATE = ROOT / "deploy" / "kubernetes" / "probe-job.yaml"


@pytest.mark.parametrize("name", ["gpu01", "gpu-01.cluster.local", "10.0.0.7", "fe80::1", "a" * 63])
def test_valid_node_names(name: str) -> None:
    assert validate_host(name) == name


@pytest.mark.parametrize(
    "name", ["", "-oProxyCommand=x", "gpu01;rm -rf /", "gpu 01", "gpu01$(id)", "a" * 64, "node_1", "x..y"]
)
def test_invalid_node_names_are_refused_before_anything_runs(name: str) -> None:
    with pytest.raises(LaunchError, match="node name"):
        launch("ssh", [name], ProbeOptions())


def test_duplicate_and_wrong_combinations_are_refused() -> None:
    with pytest.raises(LaunchError, match="twice"):
        launch("slurm", ["a", "a"], ProbeOptions())
    with pytest.raises(LaunchError, match="this machine only"):
        launch("local", ["a", "b"], ProbeOptions())
    with pytest.raises(LaunchError, match="this machine only"):
        launch("local", ["gpu-elsewhere"], ProbeOptions())
    with pytest.raises(LaunchError, match="one node at a time"):
        launch("k8s", ["a", "b"], ProbeOptions())


def test_srun_argument_list() -> None:
    opts = ProbeOptions(explicit_sizes=[8, 1024], deadline=30)
    argv = srun_argv(["gpu01", "gpu02"], opts, SlurmConfig(gpus_per_node=8, partition="gpu", python="py"))
    assert argv[0] == "srun"
    assert "--nodelist=gpu01,gpu02" in argv and "--nodes=2" in argv and "--ntasks-per-node=1" in argv
    assert "--gpus-per-node=8" in argv and "--partition=gpu" in argv and "--time=2" in argv
    probe = argv[argv.index("py") :]
    assert probe[:3] == ["py", "-m", "probes.allreduce"]
    assert "--json" in probe and "--nproc" in probe and probe[probe.index("--nproc") + 1] == "8"
    assert probe[probe.index("--nnodes") + 1] == "2" and "--master-port" in probe
    # Slurm gives each task its node rank (SLURM_NODEID) and node 0 is the step's first node: the same
    # argv runs on every node.
    assert "--node-rank" not in probe and "--master-addr" not in probe


def test_ssh_command_is_built_from_an_argument_list() -> None:
    config = SshConfig(
        python="/opt/py/bin/python", pythonpath="/srv/ncclbot", env={"NCCL_SOCKET_IFNAME": "eth0"}
    )
    argv = remote_argv(ProbeOptions(), config, nnodes=2, node_rank=1, master="gpu01")
    assert argv[:4] == [
        "env",
        "NCCLBOT_PROBE_LAUNCHER=ssh",
        "NCCL_SOCKET_IFNAME=eth0",
        "PYTHONPATH=/srv/ncclbot",
    ]
    assert argv[4:7] == ["/opt/py/bin/python", "-m", "probes.allreduce"]
    assert argv[argv.index("--node-rank") + 1] == "1"


def test_kubernetes_job_is_pinned_to_the_node_with_gpus() -> None:
    """No Kubernetes cluster can run here: the manifest and the kubectl argument lists are checked as data
    (the only mock-like test of the launchers)."""
    config = KubernetesConfig(namespace="ml", image="reg/ncclbot:1", gpus=8)
    job = render_job("gpu-07", ProbeOptions(deadline=60), config, name="ncclbot-probe-gpu-07-abc")
    spec = job["spec"]["template"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-07"]}]}
    ]
    container = spec["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert container["command"][:3] == ["python3", "-m", "probes.allreduce"]
    assert "--json" in container["command"]
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 180
    assert json.loads(json.dumps(job)) == job
    assert apply_argv(config) == ["kubectl", "--namespace", "ml", "apply", "-f", "-"]
    assert status_argv(config, "j") == ["kubectl", "--namespace", "ml", "get", "job", "j", "-o", "json"]
    assert logs_argv(config, "j")[-2:] == ["job/j", "--all-containers"]
    assert "--ignore-not-found" in delete_argv(config, "j")


def test_deploy_template_matches_the_rendered_job() -> None:
    """deploy/ holds the same Job for people who apply it by hand: same pinning, GPUs, command, shm."""
    template = yaml.safe_load(DEPLOY_TEMPLATE.read_text())
    rendered = render_job("NODE_NAME", ProbeOptions(deadline=120), KubernetesConfig(image="IMAGE", gpus=8))
    template_pod, rendered_pod = template["spec"]["template"]["spec"], rendered["spec"]["template"]["spec"]
    for key in ("affinity", "tolerations", "volumes", "restartPolicy"):
        assert template_pod[key] == rendered_pod[key], key
    template_container, rendered_container = template_pod["containers"][0], rendered_pod["containers"][0]
    for key in ("image", "resources", "volumeMounts", "env"):
        assert template_container[key] == rendered_container[key], key
    assert template_container["command"][:4] == ["python3", "-m", "probes.allreduce", "--json"]
    assert set(template_container["command"]) <= set(rendered_container["command"])
    for key in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        assert template["spec"][key] == rendered["spec"][key], key


def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child-survived"
    script = (
        f"import subprocess,time; subprocess.Popen(['sh','-c','sleep 3; touch {marker}']); time.sleep(60)"
    )
    outcome = run_command([sys.executable, "-c", script], timeout=1.0)
    assert outcome.timed_out
    result = result_from_output(
        outcome.stdout,
        outcome.stderr,
        host="h",
        launcher="local",
        returncode=None,
        timed_out=True,
        timeout=1.0,
    )
    assert result.verdict == "failed" and result.reasons == ["timed out: no result from h within 1 s"]
    import time

    time.sleep(3.5)
    assert not marker.exists()


def test_missing_tool_and_refusals_are_clear_failures() -> None:
    assert run_command(["no-such-tool-ncclbot"], timeout=5).missing_tool
    result = result_from_output(
        "", "ssh: connect to host gpu01 port 22: Connection refused\n",
        host="gpu01", launcher="ssh", returncode=255, timed_out=False, timeout=5,
    )  # fmt: skip
    assert result.reasons[0].startswith("refused: connection refused")
    missing = launch(
        "slurm",
        ["gpu01"],
        ProbeOptions(),
        slurm=SlurmConfig(srun="no-such-srun", scontrol="no-such-scontrol"),
    )
    assert missing.verdict == "failed" and "not installed" in missing.reasons[0]


def test_local_launcher_returns_the_probe_result_and_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv("NCCLBOT_PROBE_FAULT", raising=False)
    lines: list[str] = []
    opts = ProbeOptions(nproc=2, explicit_sizes=[8, 4096], iters=1, deadline=40, no_checks=True)
    result = launch("local", [], opts, on_progress=lines.append)
    assert result.verdict == "healthy", result.reasons
    assert result.launcher == "local" and result.world_size == 2 and result.host == socket.gethostname()
    assert "rank 0 on " + socket.gethostname() + " arrived" in lines
    assert any(line.startswith("allreduce 4 KiB:") for line in lines)
    assert lines[-1] == "verdict: healthy"


def test_local_launcher_timeout_names_missing_ranks_and_leaves_no_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = f"ncclbot-test-{tmp_path.name}"
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("NCCLBOT_PROBE_FAULT", "delay:0:120")
    monkeypatch.setenv("NCCLBOT_TEST_MARKER", marker)
    opts = ProbeOptions(nproc=2, explicit_sizes=[8], iters=1, deadline=60, no_checks=True)
    result = launch("local", [], opts, timeout=5)
    assert result.verdict == "failed"
    assert result.reasons == [
        f"timed out: no result from {socket.gethostname()} within 5 s; ranks that never checked in: 0"
    ]
    assert processes_with(marker) == []
