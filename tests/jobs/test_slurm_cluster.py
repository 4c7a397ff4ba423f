"""The slurm job source and cluster actions against the real single-node Slurm (22.05 on Debian 12,
jobcomp/filetxt accounting): a failed job's logs found through scontrol and sacct -c, a node drained
and resumed, a job requeued away from a node."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from bot.jobs.model import ActionError, JobRef
from bot.jobs.slurm.actions import SlurmActions
from bot.jobs.slurm.source import SlurmSource
from tests.conftest import need_service

pytestmark = pytest.mark.slurm

NODE = os.environ.get("NCCLBOT_TEST_SLURM_NODE", "localhost")


@pytest.fixture(autouse=True)
def slurm() -> None:
    need_service(os.environ.get("NCCLBOT_TEST_SLURM") == "1", "no test Slurm (source .ci/services/slurm.sh)")


def sbatch(workdir: Path, script: str, *args: str) -> str:
    (workdir / "job.sh").write_text("#!/bin/sh\n" + script)
    done = subprocess.run(
        ["sbatch", "--parsable", f"--chdir={workdir}", *args, str(workdir / "job.sh")],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout.strip().split(";")[0]


def wait_for_state(job_id: str, states: set[str], timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        shown = subprocess.run(
            ["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=30
        )
        state = next((w.split("=", 1)[1] for w in shown.stdout.split() if w.startswith("JobState=")), "")
        if state in states:
            return state
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {state or 'unknown'} after {timeout} s")


def test_a_failed_job_in_a_folder_with_spaces_is_found_with_its_per_node_log(tmp_path: Path) -> None:
    workdir = tmp_path / "my runs"
    workdir.mkdir()
    job = sbatch(workdir, "echo '[rank0]: boom'\nexit 3\n", "--job-name=train llama", "--output=%x-%j-%N.out")
    wait_for_state(job, {"FAILED"})
    info = SlurmSource().lookup(JobRef(job))
    assert (info.state, info.exit_code, info.name, info.nodes) == ("FAILED", "3:0", "train llama", (NODE,))
    [log] = info.log_paths
    assert Path(log).parent == workdir and Path(log).name.startswith(f"train llama-{job}-")
    assert Path(log).read_text() == "[rank0]: boom\n"


def test_jobcomp_accounting_knows_the_job_too(tmp_path: Path) -> None:
    job = sbatch(tmp_path, "echo '[rank0]: boom'\nexit 1\n", "--job-name=acct")
    wait_for_state(job, {"FAILED"})
    deadline = time.monotonic() + 30
    while True:  # jobcomp is written when the job record is complete
        try:
            info = SlurmSource().accounting(JobRef(job))
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert (info.state, info.exit_code, info.nodes) == ("FAILED", "1:0", (NODE,))
    assert info.log_paths == (str(tmp_path / f"slurm-{job}.out"),)


def test_drain_resume_and_requeue_away_from_the_node(tmp_path: Path) -> None:
    actions = SlurmActions()
    job = sbatch(tmp_path, "exit 1\n", "--job-name=requeue-me")
    wait_for_state(job, {"FAILED"})
    try:
        actions.drain(NODE, "ncclbot #7: network/ib-rdma", dry_run=False)
        assert "DRAIN" in actions.node_state(NODE)
        reason = subprocess.run(
            ["sinfo", "-h", "-n", NODE, "-o", "%E"], capture_output=True, text=True
        ).stdout
        assert reason.strip() == "ncclbot #7: network/ib-rdma"
        outcome = actions.requeue(job, exclude=[NODE], dry_run=False)
        assert outcome.steps[1] == f"scontrol update JobId={job} ExcNodeList={NODE}"
        shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout
        assert f"ExcNodeList={NODE}" in shown and "JobState=PENDING" in shown and "Restarts=1" in shown
    finally:
        subprocess.run(["scancel", job], timeout=30)
        actions.resume(NODE, dry_run=False)
    assert "DRAIN" not in actions.node_state(NODE)
    assert "not drained" in actions.resume(NODE, dry_run=False).detail


def test_dry_run_changes_nothing_and_slurm_refusals_are_one_line(tmp_path: Path) -> None:
    actions = SlurmActions()
    outcome = actions.drain(NODE, "x", dry_run=True)
    assert outcome.dry_run and "DRAIN" not in actions.node_state(NODE)
    with pytest.raises(
        ActionError, match=r"requeue 999999 failed at `scontrol requeuehold 999999`: .*[Ii]nvalid job id"
    ):
        actions.requeue("999999", exclude=[NODE], dry_run=False)


def test_an_unknown_node_is_refused_not_mistaken_for_the_only_one() -> None:
    """On a one-node cluster, 22.05 applies `scontrol update NodeName=<unknown>` to its only node."""
    actions = SlurmActions()
    with pytest.raises(ActionError, match="Node gpu-node-042 not found"):
        actions.drain("gpu-node-042", "x", dry_run=False)
    with pytest.raises(ActionError, match="Node gpu-node-042 not found"):
        actions.requeue("1", exclude=["gpu-node-042"], dry_run=False)
    assert "DRAIN" not in actions.node_state(NODE)
