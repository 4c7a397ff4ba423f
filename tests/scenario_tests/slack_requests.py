"""Signed Slack requests sent to a running server: slash commands, Events API callbacks, interactivity
payloads (block actions, shortcuts, view submissions). Signing follows Slack's spec (v0 HMAC-SHA256 of
"v0:<timestamp>:<body>"), computed here rather than with slack_sdk so the server is checked against the
spec, not against the library it uses itself."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

SECRET = "test-signing-secret"
FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body or b"{}")

    def shown(self) -> str:
        """What Slack would show of the response: its blocks' text, its `text`, or the plain body
        (bolt answers `ack(text=...)` alone as text/plain)."""
        try:
            document = self.json()
        except ValueError:
            return self.body.decode()
        if not isinstance(document, dict):
            return str(document)
        from tests.fakes.slack_api import blocks_text

        return "\n".join([document.get("text") or "", blocks_text(document.get("blocks") or [])])


def trigger_id() -> str:
    """Slack's trigger ids are unique per interaction (and name queued work, so tests keep them apart)."""
    return f"{int(time.time())}.42.{uuid.uuid4().hex[:16]}"


def signature(body: bytes, timestamp: int, secret: str = SECRET) -> str:
    base = b"v0:" + str(timestamp).encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def post(
    url: str,
    body: bytes,
    content_type: str,
    *,
    secret: str | None = SECRET,
    timestamp: int | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """POST to `url`/slack/events; `secret=None` sends no signature at all."""
    stamp = int(time.time()) if timestamp is None else timestamp
    sent = {"Content-Type": content_type, **(headers or {})}
    if secret is not None:
        sent["X-Slack-Request-Timestamp"] = str(stamp)
        sent["X-Slack-Signature"] = signature(body, stamp, secret)
    request = urllib.request.Request(
        url.rstrip("/") + "/slack/events", data=body, headers=sent, method="POST"
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    started = time.monotonic()
    try:
        with opener.open(request, timeout=30) as response:
            return Reply(response.status, response.read(), time.monotonic() - started)
    except urllib.error.HTTPError as error:
        return Reply(error.code, error.read(), time.monotonic() - started)


def command(
    url: str,
    text: str,
    *,
    channel: str,
    user: str = "U1",
    response_url: str = "",
    trigger: str = "",
    **kw: Any,
) -> Reply:
    fields = {
        "token": "legacy",
        "team_id": "T0FAKE",
        "channel_id": channel,
        "channel_name": "ml-infra",
        "user_id": user,
        "user_name": "someone",
        "command": "/nccl",
        "text": text,
        "response_url": response_url,
        "trigger_id": trigger or trigger_id(),
        "api_app_id": "A0FAKE",
    }
    return post(url, urlencode(fields).encode(), "application/x-www-form-urlencoded", **kw)


def event(url: str, event_body: dict[str, Any], *, event_id: str | None = None, **kw: Any) -> Reply:
    envelope = event_envelope(event_body, event_id=event_id)
    return post(url, json.dumps(envelope).encode(), "application/json", **kw)


def event_envelope(event_body: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
    return {
        "token": "legacy",
        "team_id": "T0FAKE",
        "api_app_id": "A0FAKE",
        "type": "event_callback",
        "event_id": event_id or "Ev" + uuid.uuid4().hex[:10].upper(),
        "event_time": int(time.time()),
        "authorizations": [{"team_id": "T0FAKE", "user_id": "UBOT", "is_bot": True}],
        "event": event_body,
    }


def interaction(url: str, payload: dict[str, Any], **kw: Any) -> Reply:
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return post(url, body, "application/x-www-form-urlencoded", **kw)


def mention(
    channel: str,
    ts: str,
    files: list[dict[str, Any]],
    *,
    text: str = "<@UBOT> what broke?",
    user: str = "U1",
    thread_ts: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "app_mention",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "files": files,
    }
    if thread_ts:
        body["thread_ts"] = thread_ts
    return body


def file_share(
    channel: str,
    ts: str,
    files: list[dict[str, Any]],
    *,
    text: str = "",
    user: str = "U1",
    thread_ts: str | None = None,
    channel_type: str = "channel",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "message",
        "subtype": "file_share",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "channel_type": channel_type,
        "event_ts": ts,
        "files": files,
    }
    if thread_ts:
        body["thread_ts"] = thread_ts
    return body


def block_action(
    action_id: str,
    value: dict[str, Any],
    *,
    channel: str,
    message_ts: str,
    user: str = "U1",
    response_url: str = "",
) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": user, "username": "someone", "team_id": "T0FAKE"},
        "api_app_id": "A0FAKE",
        "team": {"id": "T0FAKE"},
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
        },
        "trigger_id": trigger_id(),
        "channel": {"id": channel, "name": "ml-infra"},
        "message": {"type": "message", "ts": message_ts, "text": ""},
        "response_url": response_url,
        "actions": [
            {
                "action_id": action_id,
                "block_id": "b",
                "type": "button",
                "value": json.dumps(value),
                "action_ts": str(time.time()),
            }
        ],
    }


def message_shortcut(
    message: dict[str, Any],
    *,
    channel: str,
    user: str = "U1",
    response_url: str = "",
    callback_id: str = "diagnose_message",
) -> dict[str, Any]:
    return {
        "type": "message_action",
        "callback_id": callback_id,
        "trigger_id": trigger_id(),
        "user": {"id": user, "name": "someone"},
        "team": {"id": "T0FAKE"},
        "channel": {"id": channel, "name": "ml-infra"},
        "message_ts": message["ts"],
        "message": message,
        "response_url": response_url,
    }


def view_submission(
    callback_id: str, values: dict[str, Any], *, private_metadata: str, user: str = "U1"
) -> dict[str, Any]:
    return {
        "type": "view_submission",
        "user": {"id": user, "name": "someone"},
        "team": {"id": "T0FAKE"},
        "api_app_id": "A0FAKE",
        "trigger_id": trigger_id(),
        "view": {
            "id": "V" + uuid.uuid4().hex[:10].upper(),
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": private_metadata,
            "state": {"values": values},
        },
    }
