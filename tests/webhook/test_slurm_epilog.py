"""End to end on the real single-node Slurm: a job prints a 16-rank NCCL watchdog failure and exits 1;
the EpilogSlurmctld hook (deploy/slurm/ncclbot-epilog.py) posts the signed webhook to a running
`ncclbot serve`; the bot reads the job through the slurm job source, diagnoses and posts to the fake
Slack Web API; the posted Drain button is pressed (a signed interaction) and reaches Slurm; the node is
drained and the job requeued away from it through the same service the buttons call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.services.cluster_actions import Actor, ClusterActionService
from bot.settings import Settings
from bot.store import Store
from bot.store.queue import WorkQueue
from matcher.taxonomy import title
from tests.fakes.slack_api import FakeSlack, eventually
from tests.fixtures.multirank import write_job
from tests.jobs.test_slurm_cluster import NODE, sbatch, wait_for_state
from tests.scenario_tests import slack_requests
from tests.scenario_tests.flows import buttons
from tests.server.helpers import running_server
from tests.webhook.harness import SECRET, job_named
from tests.webhook.slurm_epilog import epilog_dir, installed_epilog

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


# The log's hosts are gpu-node-000/001; the test cluster's one node is called `localhost`, which the
# matcher rightly never names as a culprit. So the message names gpu-node-001 as the culprit, lists the
# job's Slurm node, and the drain below acts on that node.
CULPRIT_HOST = "gpu-node-001"
CHANNEL = "C0INCIDENTS"


def job_with_nccl_failure(folder: Path) -> str:
    """A 16-rank job (two 8-GPU hosts) whose rank 11 stalled before an allreduce, as the job's output."""
    expected = write_job(folder, 16, "slurm", "lagging", 11)
    assert expected.hosts == (CULPRIT_HOST,)
    (folder / "slurm-771204.out").rename(folder / "failure.txt")
    return "cat failure.txt\nexit 1\n"


def server_env(database_url: str, outlet: Path, **extra: str) -> dict[str, str]:
    return {
        "NCCLBOT_DATABASE_URL": database_url,
        "NCCLBOT_WEBHOOK_SECRET": SECRET,
        "NCCLBOT_DEFAULT_CHANNEL": "C0INCIDENTS",
        "NCCLBOT_OUTLET_FILE": str(outlet),
        "SLURM_CONF": os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"),  # for the slurm job source
        **extra,
    }


def post_for(outlet: Path, job: str, timeout: float = 90.0) -> dict[str, str]:
    """The top-level message naming `job` (text and blocks as JSON), once the server wrote it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [json.loads(line) for line in outlet.read_text().splitlines()] if outlet.exists() else []
        for line in lines:
            if (
                line["op"] == "post"
                and line["thread_ts"] is None
                and job_named(line["text"], line["blocks"]) == job
            ):
                return {"text": line["text"], "blocks": json.dumps(line["blocks"])}
        time.sleep(0.2)
    raise AssertionError(f"nothing posted for job {job} within {timeout} s")


def test_a_failed_slurm_job_is_posted_to_slack_then_its_node_drained_and_the_job_requeued(
    tmp_path: Path,
) -> None:
    epilog_dir()
    workdir = tmp_path / "llama runs"
    workdir.mkdir()
    script = job_with_nccl_failure(workdir)
    database_url = f"sqlite:///{tmp_path / 'bot.db'}"
    with FakeSlack() as slack:
        env = {
            **server_env(database_url, tmp_path / "unused.jsonl"),
            **slack.env(),
            "SLACK_SIGNING_SECRET": slack_requests.SECRET,
            "NCCLBOT_ADMIN_USERS": "UONCALL",
        }
        with (
            running_server(env) as server,
            installed_epilog(tmp_path, server.url + "/webhooks/job-failed", SECRET),
        ):
            job = sbatch(workdir, script, "--job-name=llama pretrain", "--output=%x-%j.out")
            wait_for_state(job, {"FAILED"})
            [message] = eventually(lambda: incident_messages_for(slack, job), timeout=90)
            assert (
                message["text"]
                == f"timeout/straggler-input: {title('timeout/straggler-input')} (culprit {CULPRIT_HOST})"
            )
            shown = json.dumps(message["blocks"])
            assert f"*Job:* `{job}` on `ncclbot-test`" in shown and "rank `11`" in shown
            [details] = eventually(lambda: slack.thread(CHANNEL, message["ts"]))
            assert "llama pretrain-" in json.dumps(details["blocks"])  # evidence cites the job's own stdout

            # The posted Drain button: through the admin check to the same service and on to Slurm, which
            # knows no such node (the culprit host of the log is not a node of this one-node cluster).
            drain = buttons(message)["incident.drain"]
            assert drain["text"]["text"] == f"Drain {CULPRIT_HOST}"
            payload = slack_requests.block_action(
                "incident.drain",
                json.loads(drain["value"]),
                channel=CHANNEL,
                message_ts=message["ts"],
                user="UONCALL",
            )
            assert slack_requests.interaction(server.url, payload).status == 200
            said = eventually(
                lambda: [m for m in slack.thread(CHANNEL, message["ts"]) if "drain" in m["text"]]
            )
            assert (
                f"{CULPRIT_HOST}` could not drain" in said[0]["text"]
                and f"Node {CULPRIT_HOST} not found" in said[0]["text"]
            )
            # The Requeue button likewise reaches Slurm, which is asked about the node before the job.
            requeue = buttons(message)["incident.requeue"]
            assert json.loads(requeue["value"])["job"] == job
            payload = slack_requests.block_action(
                "incident.requeue", json.loads(requeue["value"]), channel=CHANNEL, message_ts=message["ts"],
                user="UONCALL",
            )  # fmt: skip
            assert slack_requests.interaction(server.url, payload).status == 200
            said = eventually(
                lambda: [m for m in slack.thread(CHANNEL, message["ts"]) if "requeue" in m["text"]]
            )
            assert f"Job `{job}` could not be requeued" in said[0]["text"]

    with Store.open(database_url) as store:
        [incident] = store.incidents()
        pressed = store.audit_entries(action="node-drain") + store.audit_entries(action="job-requeue")
        assert [(e.actor, e.detail["outcome"], e.detail["admitted_by"]) for e in pressed] == [
            ("UONCALL", "failed", "slack admin policy"),
            ("UONCALL", "failed", "slack admin policy"),
        ]
        service = ClusterActionService(Settings(), store)
        oncall = Actor(id="UONCALL", via="slack", admitted_by="slack admin policy")
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


def incident_messages_for(slack: FakeSlack, job: str) -> list[dict[str, object]]:
    return [m for m in slack.top_level(CHANNEL) if f"*Job:* `{job}`" in json.dumps(m.get("blocks"))]


def test_with_ncclbot_on_the_controller_only_the_diagnosis_travels(tmp_path: Path) -> None:
    epilog_dir()
    workdir = tmp_path / "run"
    workdir.mkdir()
    script = job_with_nccl_failure(workdir)
    # The bot itself can read no logs here (a log folder that does not exist): a diagnosed message
    # can only come from the diagnosis the epilog made next to the logs.
    database_url, outlet = f"sqlite:///{tmp_path / 'bot.db'}", tmp_path / "messages.jsonl"
    env = server_env(
        database_url,
        outlet,
        NCCLBOT_JOB_SOURCES="*=directory",
        NCCLBOT_JOB_LOG_TEMPLATE=str(tmp_path / "nowhere/{job_id}"),
    )
    ncclbot = Path(sys.executable).with_name("ncclbot")
    with (
        running_server(env) as server,
        installed_epilog(tmp_path, server.url + "/webhooks/job-failed", SECRET, NCCLBOT_BIN=str(ncclbot)),
    ):
        job = sbatch(workdir, script, "--job-name=pretrain")
        wait_for_state(job, {"FAILED"})
        posted = post_for(outlet, job)
    assert "timeout/straggler-input" in str(posted["text"]) and f"culprit {CULPRIT_HOST}" in str(
        posted["text"]
    )
    with Store.open(database_url) as store:
        [item] = [i for i in WorkQueue(store).items() if i.key.endswith(f"/{job}/0")]
    assert item.payload["received_as"] == "slurm"
    assert item.payload["diagnosis"]["diagnoses"][0]["class"] == "timeout/straggler-input"
    assert item.payload["logs"] == []
