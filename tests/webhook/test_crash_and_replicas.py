"""Exactly once across crashes and replicas, with real `ncclbot serve` processes (tests/server/
helpers.py) writing their messages to a shared JSON-lines outlet (bot.services.file_outlet), watched
from outside: a server killed with SIGKILL while events are accepted but not posted posts each of them
once after a restart; two replicas on one PostgreSQL drain one queue and post no event twice."""

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
from tests.server.helpers import running_server, start_server
from tests.webhook.harness import SECRET, job_named

pytestmark = pytest.mark.slow

OOM = "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {r} has a total capacity of 79.15 GiB\n"  # noqa: E501


def server_env(database_url: str, outlet: Path) -> dict[str, str]:
    return {
        "NCCLBOT_DATABASE_URL": database_url,
        "NCCLBOT_WEBHOOK_SECRET": SECRET,
        "NCCLBOT_DEFAULT_CHANNEL": "C0INCIDENTS",
        "NCCLBOT_OUTLET_FILE": str(outlet),
        "NCCLBOT_WEBHOOK_LEASE_S": "3",  # a dead worker's events are taken over within 3 s
    }


def send(url: str, job: str) -> int:
    # A node of its own per job: each failure is an incident of its own, with its own top-level message.
    rank = int(job) % 8
    event = {"cluster": "prod-a", "job_id": job, "state": "FAILED", "exit_code": 1,
             "logs": [{"name": f"gpu-node-{job}.log", "text": OOM.format(r=rank)}]}  # fmt: skip
    body = json.dumps(event).encode()
    headers = {"Content-Type": "application/json", **signed_headers(SECRET, body)}
    request = urllib.request.Request(url + "/webhooks/job-failed", data=body, method="POST", headers=headers)
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as response:
        return int(response.status)


def posts_per_job(outlet: Path) -> Counter[str]:
    """Top-level messages written to the outlet, counted by the job they name."""
    if not outlet.exists():
        return Counter()
    lines = [json.loads(line) for line in outlet.read_text().splitlines()]
    tops = [line for line in lines if line["op"] == "post" and line["thread_ts"] is None]
    return Counter(job_named(line["text"], line["blocks"]) for line in tops)


def wait_for(condition: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not true after {timeout} s"
        time.sleep(0.2)


def test_a_server_killed_with_events_accepted_but_not_posted_posts_each_once_after_restart(
    database_url: str, tmp_path: Path
) -> None:
    outlet = tmp_path / "slack-down" / "messages.jsonl"  # its folder does not exist yet: posting fails
    jobs = [str(job) for job in range(101, 109)]
    server = start_server(server_env(database_url, outlet))
    try:
        for job in jobs:
            assert send(server.url, job) == 202
            assert send(server.url, job) == 202  # the sender retried: accepted, nothing new
        wait_for(lambda: server.log().count("retrying in") >= 2, timeout=60)  # the workers are trying
    finally:
        server.process.kill()  # SIGKILL: no clean shutdown, leases still held
        server.process.wait(timeout=10)
        server.log_path.unlink(missing_ok=True)
    with Store.open(database_url) as store:
        items = WorkQueue(store).items()
    assert sorted(item.key for item in items) == sorted(f"prod-a/{job}/0" for job in jobs)
    assert not any(item.status == "done" for item in items)
    outlet.parent.mkdir()  # the outlet is back
    with running_server(server_env(database_url, outlet)):
        wait_for(lambda: len(posts_per_job(outlet)) == len(jobs), timeout=120)
        time.sleep(4)  # more than a lease: anything that would post twice has had its chance
    assert posts_per_job(outlet) == Counter({job: 1 for job in jobs})


@pytest.mark.postgres
def test_two_replicas_on_one_postgresql_drain_one_queue_and_post_each_event_once(
    postgres_url: str, tmp_path: Path
) -> None:
    outlet = tmp_path / "messages.jsonl"
    jobs = [str(job) for job in range(201, 225)]
    env = server_env(postgres_url, outlet)
    with running_server(env) as one, running_server(env) as two:
        for index, job in enumerate(jobs):
            first, second = (one, two) if index % 2 else (two, one)
            assert send(first.url, job) == 202
            assert send(second.url, job) == 202  # the same event through the other replica
        wait_for(lambda: len(posts_per_job(outlet)) == len(jobs), timeout=120)
        time.sleep(4)
    assert posts_per_job(outlet) == Counter({job: 1 for job in jobs})
    posted_by = Counter(
        json.loads(line)["pid"] for line in outlet.read_text().splitlines() if '"post"' in line
    )
    assert len(posted_by) == 2, f"one replica did all the work: {posted_by}"
