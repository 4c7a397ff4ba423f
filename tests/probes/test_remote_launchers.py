"""The ssh launcher against a real key-only sshd on loopback and the slurm launcher against a real
single-node Slurm (both started by .ci/services/{sshd,slurm}.sh). The node runs this checkout's probe
with this interpreter, Gloo on CPU."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import time

import pytest

from probes.launchers import SlurmConfig, SshConfig, launch
from probes.options import ProbeOptions
from probes.spawn import free_port, slurm_first_node
from tests.conftest import need_service

from .helpers import ROOT, processes_with

QUICK = ProbeOptions(nproc=2, explicit_sizes=[8, 4096], iters=1, deadline=40, no_checks=True)


@pytest.fixture
def ssh_config() -> SshConfig:
    port = os.environ.get("NCCLBOT_TEST_SSH_PORT")
    need_service(bool(port), "no test sshd (source .ci/services/sshd.sh)")
    return SshConfig(
        username=os.environ["NCCLBOT_TEST_SSH_USER"],
        port=int(port or 0),
        client_keys=[os.environ["NCCLBOT_TEST_SSH_KEY"]],
        known_hosts=os.environ["NCCLBOT_TEST_SSH_KNOWN_HOSTS"],
        python=sys.executable,
        pythonpath=str(ROOT),
    )


@pytest.mark.sshd
def test_ssh_launcher_runs_the_probe_with_checked_host_key(ssh_config: SshConfig) -> None:
    lines: list[str] = []
    result = launch(
        "ssh", [os.environ["NCCLBOT_TEST_SSH_HOST"]], QUICK, ssh=ssh_config, on_progress=lines.append
    )
    assert result.verdict == "healthy", result.reasons
    assert result.launcher == "ssh" and result.world_size == 2
    assert all(size.correct for size in result.results)
    assert lines[-1] == "verdict: healthy"


@pytest.mark.sshd
def test_ssh_launcher_runs_one_probe_across_two_nodes(ssh_config: SshConfig) -> None:
    """127.0.0.1 and localhost reach the same sshd: two "nodes", one rank each, rendezvous on node 0."""
    ssh_config.master_port = free_port("127.0.0.1")
    opts = dataclasses.replace(QUICK, nproc=1)
    result = launch("ssh", ["127.0.0.1", "localhost"], opts, ssh=ssh_config)
    assert result.verdict == "healthy", result.reasons
    assert result.world_size == 2 and [r.rank for r in result.ranks] == [0, 1]
    assert [(link.src, link.dst) for link in result.links] == [(1, 0), (0, 1)]


@pytest.mark.sshd
def test_ssh_unknown_host_key_is_refused(ssh_config: SshConfig) -> None:
    ssh_config.known_hosts = os.path.join(os.environ["NCCLBOT_TEST_SSH_DIR"], "known_hosts_wrong")
    result = launch("ssh", [os.environ["NCCLBOT_TEST_SSH_HOST"]], QUICK, ssh=ssh_config)
    assert result.verdict == "failed"
    assert "refused: host key verification failed" in result.reasons[0]


@pytest.mark.sshd
def test_ssh_key_not_authorised_is_refused(ssh_config: SshConfig) -> None:
    ssh_config.client_keys = [os.path.join(os.environ["NCCLBOT_TEST_SSH_DIR"], "unauthorised_ed25519")]
    result = launch("ssh", [os.environ["NCCLBOT_TEST_SSH_HOST"]], QUICK, ssh=ssh_config)
    assert result.verdict == "failed"
    assert result.reasons[0].endswith("refused: permission denied (key not accepted)")


@pytest.mark.sshd
def test_ssh_closed_port_is_refused(ssh_config: SshConfig) -> None:
    ssh_config.port = 1  # nothing listens there
    result = launch("ssh", ["127.0.0.1"], QUICK, ssh=ssh_config)
    assert result.verdict == "failed" and result.reasons == ["127.0.0.1: refused: connection refused"]


@pytest.mark.sshd
def test_ssh_probe_that_overruns_the_timeout_comes_back_as_timed_out(ssh_config: SshConfig) -> None:
    marker = f"ncclbot-ssh-{time.monotonic_ns()}"
    ssh_config.env = {"NCCLBOT_PROBE_FAULT": "delay:0:60", "NCCLBOT_TEST_MARKER": marker}
    result = launch("ssh", [os.environ["NCCLBOT_TEST_SSH_HOST"]], QUICK, ssh=ssh_config, timeout=4)
    assert result.verdict == "failed"
    assert result.reasons[0].startswith("timed out: no result from 127.0.0.1 within 4 s")
    assert "ranks that never checked in: 0" in result.reasons[0]
    # Giving up closes the channel; the node's spawner sees stdin close and ends its ranks.
    stop = time.monotonic() + 5
    while processes_with(marker) and time.monotonic() < stop:
        time.sleep(0.2)
    assert processes_with(marker) == []


@pytest.mark.slurm
def test_slurm_launcher_runs_srun_on_the_named_node() -> None:
    need_service(bool(os.environ.get("NCCLBOT_TEST_SLURM")) and bool(shutil.which("srun")), "no test Slurm")
    node = os.environ.get("NCCLBOT_TEST_SLURM_NODE", "localhost")
    config = SlurmConfig(
        python=sys.executable, chdir=str(ROOT), env={"PYTHONPATH": str(ROOT)}, immediate_s=30
    )
    lines: list[str] = []
    result = launch("slurm", [node], QUICK, slurm=config, on_progress=lines.append)
    assert result.verdict == "healthy", result.reasons
    assert result.launcher == "slurm"
    assert [r.rank for r in result.ranks] == [0, 1]
    assert {rank.scheduler_node for rank in result.ranks} == {node}
    assert lines[-1] == "verdict: healthy"


@pytest.mark.slurm
def test_slurm_unknown_node_is_a_clear_failure() -> None:
    need_service(bool(os.environ.get("NCCLBOT_TEST_SLURM")) and bool(shutil.which("srun")), "no test Slurm")
    config = SlurmConfig(python=sys.executable, immediate_s=5)
    result = launch("slurm", ["no-such-node-7"], QUICK, slurm=config, timeout=30)
    assert result.verdict == "failed"
    assert result.reasons[0].startswith("Slurm does not know node no-such-node-7")


def wait_until_idle(node: str, seconds: float = 15.0) -> None:
    """After RESUME the node shows `idle*` for a moment; later tests need it plainly idle."""
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        state = subprocess.run(
            ["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True, text=True, timeout=30
        )
        if state.stdout.strip() == "idle":
            return
        time.sleep(0.2)


@pytest.mark.slurm
def test_slurm_drained_node_is_reported_with_its_reason() -> None:
    need_service(bool(os.environ.get("NCCLBOT_TEST_SLURM")) and bool(shutil.which("srun")), "no test Slurm")
    node = os.environ.get("NCCLBOT_TEST_SLURM_NODE", "localhost")
    scontrol = ["scontrol", "update", f"NodeName={node}"]
    subprocess.run([*scontrol, "State=DRAIN", "Reason=ncclbot probe test"], check=True, timeout=30)
    try:
        result = launch("slurm", [node], QUICK, slurm=SlurmConfig(python=sys.executable, immediate_s=5))
    finally:
        subprocess.run([*scontrol, "State=RESUME"], check=True, timeout=30)
        wait_until_idle(node)
    assert result.verdict == "failed"
    assert result.reasons[0].startswith(f"Slurm node {node} is unavailable: State=IDLE+DRAIN")
    assert "(ncclbot probe test)" in result.reasons[0]


@pytest.mark.slurm
def test_node_zero_of_a_slurm_step_comes_from_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    need_service(bool(os.environ.get("NCCLBOT_TEST_SLURM")) and bool(shutil.which("srun")), "no test Slurm")
    monkeypatch.setenv("SLURM_STEP_NODELIST", "gpu[07-08],gpu01")
    assert slurm_first_node() == "gpu07"
    monkeypatch.delenv("SLURM_STEP_NODELIST")
    assert slurm_first_node() is None
