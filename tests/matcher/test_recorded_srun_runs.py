"""Diagnoses of real `srun` steps on the single-node test Slurm: four CPU tasks over gloo on loopback,
one task killed by SIGKILL.

The job runs as users run one (`sbatch`, `srun --label --kill-on-bad-exit`); the test reads its output
file as Slurm wrote it, so the wording is the installed Slurm's and torch's, not an excerpt from memory.
The node is `localhost` here, which must never be named as a culprit host.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from matcher.pipeline import diagnose
from tests.conftest import need_service
from tests.fixtures.torchrun_faults import free_port

pytestmark = pytest.mark.slurm

TASK = """
import datetime, os, signal, time
import torch, torch.distributed as dist
rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
dist.init_process_group("gloo", init_method=os.environ["INIT"], rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=20))
t = torch.ones(1024)
for step in range(11):
    if step == 3 and rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(t)
    time.sleep(0.05)
"""


@pytest.fixture(autouse=True)
def slurm() -> None:
    need_service(os.environ.get("NCCLBOT_TEST_SLURM") == "1", "no test Slurm (source .ci/services/slurm.sh)")


def _run_job(workdir: Path) -> Path:
    (workdir / "task.py").write_text(TASK)
    script = (
        "#!/bin/sh\n"
        f"export INIT=tcp://127.0.0.1:{free_port()} OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo\n"
        f"srun --label --kill-on-bad-exit=1 {sys.executable} {workdir / 'task.py'}\n"
    )
    (workdir / "job.sh").write_text(script)
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--ntasks=4", "--overcommit", f"--chdir={workdir}",
         "--output=slurm-%j.out", str(workdir / "job.sh")],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    job = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        queue = subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True, timeout=30)
        if not queue.stdout.strip():
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"job {job} still queued or running after 120 s")
    return workdir / f"slurm-{job}.out"


def test_a_task_killed_under_srun_is_named_and_the_node_localhost_is_not(tmp_path: Path) -> None:
    out = _run_job(tmp_path)
    text = out.read_text()
    assert "task 2" in text, text[-2000:]
    d = diagnose([str(out)]).diagnosis
    assert d.diagnoses[0].class_id == "system/host-oom", [c.class_id for c in d.diagnoses]
    assert d.culprit is not None and d.culprit.ranks == (2,)
    assert "localhost" not in d.culprit.hosts and "127.0.0.1" not in d.culprit.hosts
