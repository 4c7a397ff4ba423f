"""The webhook plugged into the real WSGI app under waitress in this process, on a free loopback port,
with an InMemoryOutlet to count posts. (Subprocess servers — crash and replica tests — use
tests/server/helpers.py.)"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import waitress

from bot.server.app import create_app
from bot.server.context import ServerContext
from bot.services.outlet import InMemoryOutlet
from bot.settings import Settings
from bot.webhook import plug
from bot.webhook.auth import signed_headers

SECRET = "test-webhook-secret"
PATH = "/webhooks/job-failed"

# An incident message names its job as "*Job:* `48213` on `prod-a`" (bot.render.slack_incident); a job
# that could not be diagnosed is "FAILED (exit 1): job 48213 on prod-a — not diagnosed".
_INCIDENT_JOB = re.compile(r"\*Job:\* `([^`]+)`")
_PLAIN_JOB = re.compile(r"\bjob (\S+) ")


def job_named(text: str, blocks: object) -> str | None:
    """The job a top-level message is about."""
    found = _INCIDENT_JOB.search(json.dumps(blocks)) or _PLAIN_JOB.search(text)
    return found.group(1) if found else None


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class Webhook:
    url: str
    outlet: InMemoryOutlet
    context: ServerContext

    def top_level_for(self, job: str) -> list[Any]:
        """The top-level messages about `job` (PostedMessage, edits in `.current`)."""
        return [p for p in self.outlet.top_level() if job_named(p.current.text, p.current.blocks) == job]

    def post(self, body: bytes, headers: dict[str, str], *, path: str = PATH) -> Answer:
        request = urllib.request.Request(self.url + path, data=body, headers=headers, method="POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=30) as response:
                return Answer(response.status, json.loads(response.read()), dict(response.headers))
        except urllib.error.HTTPError as error:
            return Answer(error.code, json.loads(error.read()), dict(error.headers))

    def send(
        self, document: dict[str, Any], *, secret: str = SECRET, path: str = PATH, now: float | None = None
    ) -> Answer:
        """Signed at `now` (default: now); a sender that retries signs again, so the same signed bytes
        twice are a replay (refused)."""
        body = json.dumps(document).encode()
        return self.post(
            body, {"Content-Type": "application/json", **signed_headers(secret, body, now=now)}, path=path
        )


def settings_for(database_url: str, **fields: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "webhook_secret": SECRET,
        "default_channel": "C0INCIDENTS",
        "webhook_workers": 2,
    }
    values.update(fields)
    return Settings(**values)


@contextmanager
def running_webhook(settings: Settings) -> Iterator[Webhook]:
    outlet = InMemoryOutlet()
    context = ServerContext(settings=settings, outlet=outlet)
    plug.plug(context)
    server = waitress.create_server(
        create_app(context),
        host="127.0.0.1",
        port=0,
        threads=4,
        max_request_body_size=settings.webhook_max_bytes,  # as bot.server.main.serve
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    context.start_background()
    try:
        yield Webhook(f"http://127.0.0.1:{server.effective_port}", outlet, context)
    finally:
        context.stop_background()
        server.close()
        thread.join(timeout=10)
