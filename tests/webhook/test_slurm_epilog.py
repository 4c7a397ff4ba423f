"""End to end on the real single-node Slurm: a job prints a 16-rank NCCL watchdog failure and exits 1;
the EpilogSlurmctld hook (deploy/slurm/ncclbot-epilog.py) posts the signed webhook to the running bot;
the bot reads the job through the slurm job source, diagnoses and posts; the node is drained and the
job requeued away from it through the same service the Slack buttons call."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.services.cluster_actions import Actor, ClusterActionService
from bot.store import Store
from bot.store.queue import WorkQueue
from tests.fixtures.multirank import write_job
from tests.jobs.test_slurm_cluster import NODE, sbatch, wait_for_state
from tests.webhook.harness import SECRET, Webhook, running_webhook, settings_for
from tests.webhook.slurm_epilog import epilog_dir, installed_epilog

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


# The log's hosts are gpu-node-000/001; the test cluster's one node is called `localhost`, which the
# matcher rightly never names as a culprit. So the message names gpu-node-001 as the culprit, lists the
# job's Slurm node, and the drain below acts on that node.
CULPRIT_HOST = "gpu-node-001"


def job_with_nccl_failure(folder: Path) -> str:
    """A 16-rank job (two 8-GPU hosts) whose rank 11 stalled before an allreduce, as the job's output."""
    expected = write_job(folder, 16, "slurm", "lagging", 11)
    assert expected.hosts == (CULPRIT_HOST,)
    (folder / "slurm-771204.out").rename(folder / "failure.txt")
    return "cat failure.txt\nexit 1\n"


def post_for(webhook: Webhook, job: str, timeout: float = 90.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for posted in webhook.outlet.top_level():
            if f"job {job} " in posted.message.text:
                return {"text": posted.message.text, "blocks": json.dumps(posted.message.blocks)}
        time.sleep(0.2)
    raise AssertionError(f"nothing posted for job {job} within {timeout} s; posts: {webhook.outlet.posted}")


def test_a_failed_slurm_job_posts_its_diagnosis_then_its_node_is_drained_and_the_job_requeued(
    tmp_path: Path,
) -> None:
    epilog_dir()
    workdir = tmp_path / "llama runs"
    workdir.mkdir()
    script = job_with_nccl_failure(workdir)
    settings = settings_for(f"sqlite:///{tmp_path / 'bot.db'}", admin_users=["UONCALL"])
    with (
        running_webhook(settings) as webhook,
        installed_epilog(tmp_path, webhook.url + "/webhooks/job-failed", SECRET),
    ):
        job = sbatch(workdir, script, "--job-name=llama pretrain", "--output=%x-%j.out")
        wait_for_state(job, {"FAILED"})
        posted = post_for(webhook, job)
    assert f"FAILED (exit 1): job {job} (llama pretrain) on ncclbot-test" in str(posted["text"])
    assert "timeout/straggler-input" in str(posted["text"])
    assert f"culprit {CULPRIT_HOST}" in str(posted["text"])
    assert "rank 11" in str(posted["blocks"]) and f"*Nodes:* {NODE}" in str(posted["blocks"])

    with Store.open(settings.database_url) as store:
        [incident] = store.incidents()
        service = ClusterActionService(settings, store)
        oncall = Actor(id="UONCALL", via="slack")
        try:
            service.drain(oncall, NODE, incident_id=incident.id, cluster="ncclbot-test")
            sinfo = subprocess.run(["sinfo", "-h", "-n", NODE, "-o", "%T|%E"], capture_output=True, text=True)
            assert sinfo.stdout.strip() == f"drained|ncclbot #{incident.id}: timeout/straggler-input"
            service.requeue(oncall, job, exclude=[NODE], incident_id=incident.id, cluster="ncclbot-test")
            shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout
            assert f"ExcNodeList={NODE}" in shown and "JobState=PENDING" in shown
        finally:
            subprocess.run(["scancel", job], timeout=30)
            service.resume(Actor.cli(), NODE, cluster="ncclbot-test")
        audit = [
            (entry.action, entry.detail.get("outcome"), entry.actor)
            for entry in store.audit_entries(incident_id=incident.id)
        ]
    assert ("node-drain", "done", "UONCALL") in audit and ("job-requeue", "done", "UONCALL") in audit


def test_with_ncclbot_on_the_controller_only_the_diagnosis_travels(tmp_path: Path) -> None:
    epilog_dir()
    workdir = tmp_path / "run"
    workdir.mkdir()
    script = job_with_nccl_failure(workdir)
    # The bot itself can read no logs here (a log folder that does not exist): a diagnosed message
    # can only come from the diagnosis the epilog made next to the logs.
    settings = settings_for(
        f"sqlite:///{tmp_path / 'bot.db'}",
        job_sources={"*": "directory"},
        job_log_template=str(tmp_path / "nowhere/{job_id}"),
    )
    ncclbot = Path(sys.executable).with_name("ncclbot")
    url = "/webhooks/job-failed"
    with (
        running_webhook(settings) as webhook,
        installed_epilog(tmp_path, webhook.url + url, SECRET, NCCLBOT_BIN=str(ncclbot)),
    ):
        job = sbatch(workdir, script, "--job-name=pretrain")
        wait_for_state(job, {"FAILED"})
        posted = post_for(webhook, job)
    assert "timeout/straggler-input" in str(posted["text"]) and f"culprit {CULPRIT_HOST}" in str(
        posted["text"]
    )
    with Store.open(settings.database_url) as store:
        [item] = [i for i in WorkQueue(store).items() if i.key.endswith(f"/{job}/0")]
    assert item.payload["received_as"] == "slurm"
    assert item.payload["diagnosis"]["diagnoses"][0]["class"] == "timeout/straggler-input"
    assert item.payload["logs"] == []
