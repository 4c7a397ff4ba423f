"""Job-failure webhooks sent to a running `ncclbot serve`, and the posts they became at the fake Slack,
for the reliability tests and benchmarks/server_load.py."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bot.webhook.auth import signed_headers
from tests.fakes.slack_api import FakeSlack
from tests.webhook.harness import SECRET, job_named

CHANNEL = "C0INCIDENTS"
PATH = "/webhooks/job-failed"
OOM = "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {r} has a total capacity of 79.15 GiB\n"  # noqa: E501


def webhook_env(slack: FakeSlack, database_url: str, **extra: str) -> dict[str, str]:
    return {
        **slack.env(),
        "SLACK_SIGNING_SECRET": "reliability-signing-secret",
        "NCCLBOT_DATABASE_URL": database_url,
        "NCCLBOT_WEBHOOK_SECRET": SECRET,
        "NCCLBOT_DEFAULT_CHANNEL": CHANNEL,
        "NCCLBOT_WEBHOOK_LEASE_S": "3",
        **extra,
    }


def job_event(job: str, *, logs: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A failed job whose log names a node of its own (its own incident, its own top-level message)."""
    rank = int(job) % 8 if job.isdigit() else 0
    default = [{"name": f"gpu-node-{job}.log", "text": OOM.format(r=rank)}]
    return {"cluster": "prod-a", "job_id": job, "state": "FAILED", "exit_code": 1, "logs": logs or default}


@dataclass(frozen=True)
class Sent:
    status: int
    seconds: float
    body: dict[str, Any]


def post(url: str, body: bytes, headers: dict[str, str]) -> Sent:
    request = urllib.request.Request(url + PATH, data=body, method="POST", headers=headers)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    started = time.monotonic()
    try:
        with opener.open(request, timeout=60) as response:
            return Sent(response.status, time.monotonic() - started, json.loads(response.read() or b"{}"))
    except urllib.error.HTTPError as error:
        return Sent(error.code, time.monotonic() - started, json.loads(error.read() or b"{}"))


def signed(document: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(document).encode()
    return body, {"Content-Type": "application/json", **signed_headers(SECRET, body)}


def send(url: str, document: dict[str, Any]) -> Sent:
    return post(url, *signed(document))


def posts_per_job(slack: FakeSlack) -> Counter[str | None]:
    """The bot's top-level messages in the channel, counted by the job they name."""
    tops = [m for m in slack.top_level(CHANNEL) if m.get("bot_id")]
    return Counter(job_named(m.get("text", ""), m.get("blocks")) for m in tops)
