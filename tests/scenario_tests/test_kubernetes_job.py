"""`/nccl diagnose <job>` on a Kubernetes cluster: the pod logs the bot fetched become the incident's
kept bundle (copies, in their node folders, within the bundle's size bound), the fetch folder is removed,
and files posted later in the thread are diagnosed together with them.

No Kubernetes cluster can run here: the job source talks to the fake API server of tests/jobs/fake_kube.py
(real HTTP, the official client) — the one mocked part. Slack is the tests' fake Web API; the server is a
real `ncclbot serve`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store import Store
from tests.fakes.slack_api import FakeSlack, blocks_text, eventually
from tests.jobs.fake_kube import KubeState, fake_kube
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import server_env
from tests.scenario_tests.flows import incident_messages
from tests.scenario_tests.logs import xid_logs
from tests.server.helpers import running_server

RECORDED = Path(__file__).parent.parent / "jobs" / "recorded"
TIMEOUT = (
    "[rank{rank}]:[E1130 03:11:40.112000 41 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632] "
    "[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4812, OpType=ALLREDUCE, "
    "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[tuple[FakeSlack, str, Path]]:
    pods = json.loads((RECORDED / "k8s-pods.json").read_text())
    state = KubeState(
        pods={"research": pods["pytorchjob"]},
        logs={
            ("bert-large-master-0", "pytorch", False): TIMEOUT.format(rank=0),
            ("bert-large-worker-0", "pytorch", False): TIMEOUT.format(rank=8),
            # worker-1 restarted: the source reads its previous container too
            ("bert-large-worker-1", "pytorch", True): TIMEOUT.format(rank=16),
            ("bert-large-worker-1", "pytorch", False): "restarted, waiting for peers\n",
        },
    )
    with fake_kube(state) as kube, FakeSlack() as slack:
        env = server_env(
            slack,
            tmp_path,
            NCCLBOT_JOB_SOURCES="*=kubernetes",
            NCCLBOT_KUBERNETES_KUBECONFIG=str(kube.kubeconfig(tmp_path)),
            NCCLBOT_KUBERNETES_NAMESPACE="research",
        )
        with running_server(env) as server:
            yield slack, server.url, tmp_path


def test_fetched_pod_logs_are_kept_with_the_incident_and_read_again_with_files_added_later(
    bot: tuple[FakeSlack, str, Path],
) -> None:
    slack, url, root = bot
    channel = "CKUBE01"
    reply = send.command(url, "diagnose bert-large", channel=channel)
    assert (reply.status, reply.shown()) == (200, "Fetching the logs of job `bert-large`…")
    [incident] = eventually(lambda: incident_messages(slack, channel), timeout=60)
    database = f"sqlite:///{root / 'store.sqlite3'}"
    with Store.open(database) as store:
        [summary] = store.incidents()
        kept = store.bundle(summary.id).files
    # Copies in the bundle, each in its node folder, counted against the bundle bound; no fetch folder left.
    assert sorted((Path(f.path).parent.name, f.name) for f in kept) == [
        ("gpu-node-017", "bert-large-master-0__pytorch.log"),
        ("gpu-node-017", "bert-large-worker-0__pytorch.log"),
        ("gpu-node-018", "bert-large-worker-1__pytorch__previous.log"),
    ]
    assert all(not f.external and f.size_bytes > 0 and Path(f.path).is_file() for f in kept)
    # (removed once the diagnosis is done, just after it is posted)
    eventually(lambda: not list((root / "spool").glob("ncclbot-job-*")))
    # Evidence names the pod log by its node and file, not by a path of the bot's.
    details = json.dumps(eventually(lambda: slack.thread(channel, incident["ts"])))
    assert "gpu-node-017/bert-large-master-0__pytorch.log" in details
    assert str(root) not in details

    # The node's kernel log, posted later in the thread: diagnosed together with the kept pod logs.
    kernel = [slack.add_file(name, data) for name, data in xid_logs(0).items() if name.startswith("kernel")]
    posted = slack.post_user_message(channel, "dmesg", files=kernel, thread_ts=incident["ts"])
    assert (
        send.event(url, send.file_share(channel, posted["ts"], kernel, thread_ts=incident["ts"])).status
        == 200
    )

    def refined() -> str:
        [message] = incident_messages(slack, channel)
        shown = blocks_text(message["blocks"])
        return shown if "hardware/gpu-xid" in shown else ""

    eventually(refined, timeout=60)
    with Store.open(database) as store:
        [summary] = store.incidents()
        names = sorted(f.name for f in store.bundle(summary.id).files)
    assert "bert-large-master-0__pytorch.log" in names and len(names) == 3 + len(kernel)
    assert summary.occurrences == 1  # the same failure seen better, not a repeat
