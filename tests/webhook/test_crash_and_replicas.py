"""Exactly once across crashes and replicas, with real `ncclbot serve` processes (tests/server/
helpers.py) posting to the fake Slack Web API (tests/fakes/slack_api.py): a server killed with SIGKILL
while events are accepted but not posted (Slack answering 500) posts each of them once after a restart;
two replicas on one PostgreSQL drain one queue and post no event twice."""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from bot.store import Store
from bot.store.queue import WorkQueue
from bot.webhook.auth import signed_headers
from tests.fakes.slack_api import FakeSlack
from tests.server.helpers import running_server, start_server
from tests.webhook.harness import SECRET, job_named

pytestmark = pytest.mark.slow

CHANNEL = "C0INCIDENTS"
OOM = "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {r} has a total capacity of 79.15 GiB\n"  # noqa: E501


def server_env(database_url: str, slack: FakeSlack) -> dict[str, str]:
    return {
        **slack.env(),
        "SLACK_SIGNING_SECRET": "crash-test-signing-secret",  # `serve` refuses a bot token without it
        "NCCLBOT_DATABASE_URL": database_url,
        "NCCLBOT_WEBHOOK_SECRET": SECRET,
        "NCCLBOT_DEFAULT_CHANNEL": CHANNEL,
        "NCCLBOT_WEBHOOK_LEASE_S": "3",  # a dead worker's events are taken over within 3 s
    }


def send(url: str, job: str, *, retry: int = 0) -> int:
    """The job's failure event, signed now (`retry` seconds later for a sender's retry: it signs again,
    and the same signed bytes twice are a replay, refused)."""
    # A node of its own per job: each failure is an incident of its own, with its own top-level message.
    rank = int(job) % 8
    event = {"cluster": "prod-a", "job_id": job, "state": "FAILED", "exit_code": 1,
             "logs": [{"name": f"gpu-node-{job}.log", "text": OOM.format(r=rank)}]}  # fmt: skip
    body = json.dumps(event).encode()
    headers = {"Content-Type": "application/json", **signed_headers(SECRET, body, now=time.time() + retry)}
    request = urllib.request.Request(url + "/webhooks/job-failed", data=body, method="POST", headers=headers)
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as response:
        return int(response.status)


def posts_per_job(slack: FakeSlack) -> Counter[str]:
    """The bot's top-level messages in the channel, counted by the job they name."""
    tops = [m for m in slack.top_level(CHANNEL) if m.get("bot_id")]
    return Counter(job_named(m.get("text", ""), m.get("blocks")) for m in tops)


def wait_for(condition: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not true after {timeout} s"
        time.sleep(0.2)


def test_a_server_killed_with_events_accepted_but_not_posted_posts_each_once_after_restart(
    database_url: str,
) -> None:
    jobs = [str(job) for job in range(101, 109)]
    with FakeSlack() as slack:
        slack.fail("chat.postMessage", 500, times=1_000_000)  # Slack is down: nothing can be posted
        server = start_server(server_env(database_url, slack))
        try:
            for job in jobs:
                assert send(server.url, job) == 202
                assert send(server.url, job, retry=1) == 202  # the sender retried: accepted, nothing new
            wait_for(lambda: len(slack.calls_to("chat.postMessage")) >= 2, timeout=60)  # the workers try
        finally:
            server.process.kill()  # SIGKILL: no clean shutdown, leases still held
            server.process.wait(timeout=10)
            server.log_path.unlink(missing_ok=True)
        assert posts_per_job(slack) == Counter()
        with Store.open(database_url) as store:
            items = WorkQueue(store).items()
        assert sorted(item.key for item in items) == sorted(f"prod-a/{job}/0" for job in jobs)
        assert not any(item.status == "done" for item in items)
        with slack.state.lock:
            slack.state.failures.clear()  # Slack is back
        with running_server(server_env(database_url, slack)):
            wait_for(lambda: len(posts_per_job(slack)) == len(jobs), timeout=120)
            time.sleep(4)  # more than a lease: anything that would post twice has had its chance
        assert posts_per_job(slack) == Counter({job: 1 for job in jobs})


@pytest.mark.postgres
def test_two_replicas_on_one_postgresql_drain_one_queue_and_post_each_event_once(postgres_url: str) -> None:
    jobs = [str(job) for job in range(201, 225)]
    with FakeSlack() as slack:
        env = server_env(postgres_url, slack)
        with running_server(env) as one, running_server(env) as two:
            for index, job in enumerate(jobs):
                first, second = (one, two) if index % 2 else (two, one)
                assert send(first.url, job) == 202
                assert send(second.url, job, retry=1) == 202  # the same event through the other replica
            wait_for(lambda: len(posts_per_job(slack)) == len(jobs), timeout=120)
            time.sleep(4)
        assert posts_per_job(slack) == Counter({job: 1 for job in jobs})
    with Store.open(postgres_url) as store:
        workers = {item.claimed_by.split(":")[1] for item in WorkQueue(store).items() if item.claimed_by}
    assert len(workers) == 2, f"one replica did all the work: {workers}"  # process ids of the claimers


def test_a_server_killed_after_slack_took_the_post_but_before_it_heard_back_posts_nothing_twice(
    tmp_path: Path,
) -> None:
    """The narrowest window: the message is in Slack, the store does not know it. After the restart the
    post is found again by its idempotency key (message metadata) instead of being made twice."""
    database_url = f"sqlite:///{tmp_path / 'bot.db'}"
    with FakeSlack() as slack:
        slack.delay_answers("chat.postMessage", 60)  # Slack posts, then takes a minute to say so
        server = start_server(server_env(database_url, slack))
        try:
            assert send(server.url, "301") == 202
            wait_for(lambda: posts_per_job(slack) == Counter({"301": 1}), timeout=60)
        finally:
            server.process.kill()
            server.process.wait(timeout=10)
            server.log_path.unlink(missing_ok=True)
        slack.delay_answers("chat.postMessage", 0)
        with running_server(server_env(database_url, slack)):
            wait_for(lambda: _done(database_url, "prod-a/301/0"), timeout=120)
        assert posts_per_job(slack) == Counter({"301": 1})
        [top] = [m for m in slack.top_level(CHANNEL) if m.get("bot_id")]
        assert [m["text"] for m in slack.thread(CHANNEL, top["ts"])] == ["Evidence and runbook steps"]


def _done(database_url: str, key: str) -> bool:
    with Store.open(database_url) as store:
        return any(item.key == key and item.status == "done" for item in WorkQueue(store).items())
