"""`ncclbot probe` end to end: local Gloo probe, JSON and readable output, the run stored and shown by
`ncclbot history`, bad input as one line with exit 2, and the fleet-history comparison on a real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.services.probe import apply_history, fleet_history
from bot.store import Store
from probes.result import ProbeResult
from tests.conftest import need_service

from .helpers import ROOT, probe_env


def ncclbot(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = probe_env(tmp_path, NCCLBOT_DATABASE_URL=f"sqlite:///{tmp_path / 'store.db'}")
    return subprocess.run(
        [sys.executable, "-m", "bot", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_probe_local_json_is_stored_and_shown_in_history(tmp_path: Path) -> None:
    args = ["probe", "--via", "local", "--nproc", "2", "--json", "--sizes", "8,1K", "--iters", "1"]
    done = ncclbot(tmp_path, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    result = ProbeResult.from_json(done.stdout.strip())
    assert result.verdict == "healthy" and result.world_size == 2 and result.backend == "gloo"
    assert "probe: verdict: healthy" in done.stderr  # progress went to the terminal as it happened
    history = ncclbot(tmp_path, "history")
    assert history.returncode == 0, history.stderr
    assert result.host in history.stdout and "healthy" in history.stdout


def test_probe_local_prints_a_readable_verdict(tmp_path: Path) -> None:
    done = ncclbot(tmp_path, "probe", "--nproc", "2", "--sizes", "8", "--iters", "1", "--quiet", "--no-store")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("HEALTHY  gloo, 2 ranks on")
    assert "busbw GB/s" in done.stdout and "node checks" in done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["probe", "gpu01;reboot"], "ncclbot: invalid node name 'gpu01;reboot'"),
        (["probe", "--bisect", "gpu01"], "ncclbot: --bisect needs at least two nodes"),
        (["probe", "a", "b", "--via", "local"], "ncclbot: --via local probes this machine only"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    done = ncclbot(tmp_path, *args, "--no-store")
    assert done.returncode == 2
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1


def test_fleet_history_of_the_same_sku_degrades_a_slow_node(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'fleet.db'}") as store:
        for host, peak in (("gpu01", 455.0), ("gpu02", 460.0), ("gpu03", 470.0)):
            run = ProbeResult("healthy", [], "nccl", 8, host, sku="8xNVIDIA H100", peak_busbw_gbps=peak)
            store.record_probe_run(run.to_dict(), node=host)
        other = ProbeResult("healthy", [], "nccl", 8, "a100", sku="8xNVIDIA A100", peak_busbw_gbps=10.0)
        store.record_probe_run(other.to_dict(), node="a100")
        previous = fleet_history(store, "8xNVIDIA H100")
    assert sorted(previous) == [455.0, 460.0, 470.0]
    slow = ProbeResult("healthy", [], "nccl", 8, "gpu04", sku="8xNVIDIA H100", peak_busbw_gbps=300.0)
    apply_history(slow, previous)
    assert slow.verdict == "degraded"
    assert slow.reasons == [
        "busbw 300.0 GB/s is 65% of this fleet's median 460.0 GB/s over 3 previous runs of the same SKU"
    ]
    fine = ProbeResult("healthy", [], "nccl", 8, "gpu05", sku="8xNVIDIA H100", peak_busbw_gbps=450.0)
    apply_history(fine, previous)
    assert fine.verdict == "healthy"
    assert json.loads(fine.to_json())["reasons"] == []


@pytest.mark.sshd
def test_probe_two_nodes_over_ssh_with_bisect(tmp_path: Path) -> None:
    """`ncclbot probe NODE NODE --via ssh --bisect` against the loopback sshd (two names, one machine)."""
    need_service(bool(os.environ.get("NCCLBOT_TEST_SSH_PORT")), "no test sshd (source .ci/services/sshd.sh)")
    done = ncclbot(
        tmp_path,
        "probe", "127.0.0.1", "localhost", "--via", "ssh", "--bisect", "--json", "--quiet",
        "--ssh-user", os.environ["NCCLBOT_TEST_SSH_USER"], "--ssh-port", os.environ["NCCLBOT_TEST_SSH_PORT"],
        "--ssh-key", os.environ["NCCLBOT_TEST_SSH_KEY"],
        "--ssh-known-hosts", os.environ["NCCLBOT_TEST_SSH_KNOWN_HOSTS"],
        "--remote-python", sys.executable, "--remote-pythonpath", str(ROOT),
        "--nproc", "1", "--sizes", "8", "--iters", "1", "--no-checks",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    assert outcome["whole_set_healthy"] is True and outcome["bad"] == []
    assert outcome["steps"] == [{"round": 0, "nodes": ["127.0.0.1", "localhost"], "healthy": True}]
    history = ncclbot(tmp_path, "history", "--node", "localhost")
    assert "healthy" in history.stdout
