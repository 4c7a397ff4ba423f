"""Messages that carry logs: an @mention or a DM with files (or a pasted log), and files posted in an
incident's thread (they join its bundle and the diagnosis is made again).

Such an event is committed to the durable queue (listener middleware, before Slack is answered), so an
event Slack was told "received" is never lost; an intake worker then answers it (`take_message`). Slack
may deliver one upload as both `app_mention` and `message`/`file_share`: both are committed in one queue
group (run one after the other) and the second finds the first's placeholder and queued diagnosis, which
are keyed by the message's channel and ts."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from slack_bolt import App, BoltResponse

from bot.services.outlet import Message, MessageRef
from bot.services.posting import post_once
from bot.slack.deps import SlackDeps
from bot.slack.files import SharedFile
from bot.slack.middleware import DATABASE_DOWN, unavailable
from bot.slack.work import EVENT, DiagnoseTask

log = logging.getLogger("ncclbot.slack.events")

# A pasted log worth reading: a few lines at least (a bare "@ncclbot help me" is not one).
MIN_PASTED_LINES = 3
_MENTION = re.compile(r"<@[UW][A-Z0-9]+>")
HINT = (
    "Attach the log files to the message that mentions me (or paste the log), or use `/nccl diagnose`. "
    "`/nccl help` lists everything I do."
)


def pasted_log(text: str) -> str | None:
    """The text of a message as a log, when it looks like one; code fences removed."""
    body = _MENTION.sub("", text or "").replace("```", "\n").strip()
    return body if body.count("\n") + 1 >= MIN_PASTED_LINES else None


def brings_logs(event: dict[str, Any]) -> bool:
    """The events committed to the queue (the listeners below)."""
    kind = event.get("type")
    return kind == "app_mention" or (kind == "message" and event.get("subtype") == "file_share")


def committed(deps: SlackDeps) -> Callable[..., BoltResponse | None]:
    """Listener middleware: commit the event to the queue; 503 while the database is down (Slack
    delivers it again later)."""

    def middleware(body: dict[str, Any], next: Callable[[], None]) -> BoltResponse | None:
        event = body.get("event") or {}
        where = f"{event.get('channel')}:{event.get('ts')}"
        try:
            fresh = deps.background.submit(
                EVENT, str(body.get("event_id") or where), {"event": event}, group=f"message:{where}"
            )
        except DATABASE_DOWN as error:
            log.warning("database unavailable, event not taken: %s", type(error).__name__)
            return unavailable(body, deps.client)
        if not fresh:
            log.info("dropping a repeated delivery of event %s", body.get("event_id"))
        next()
        return None

    return middleware


def register(app: App, deps: SlackDeps) -> None:
    @app.event("app_mention", middleware=[committed(deps)])
    def mention() -> None:
        """Committed by the middleware; an intake worker answers it (take_message)."""

    @app.event({"type": "message", "subtype": "file_share"}, middleware=[committed(deps)])
    def file_share() -> None:
        """Committed by the middleware; an intake worker answers it (take_message)."""

    @app.event("message")
    def other_message() -> None:
        """Other messages (chatter, edits, the bot's own posts and uploads) concern nobody here; the app
        subscribes to no `file_shared` event, so its own report uploads never loop back."""


def take_message(deps: SlackDeps, event: dict[str, Any]) -> None:
    """Answer one committed event: a placeholder and a queued diagnosis, or a hint. Safe to run again
    for the same message (a retry, the other event type): every post and the queued task are keyed by
    the message."""
    if event.get("bot_id") or not event.get("channel") or not event.get("ts"):
        return  # the bot's own, or nothing to answer in
    mentioned = event.get("type") == "app_mention"
    channel, ts = str(event.get("channel")), str(event.get("ts"))
    thread_ts = event.get("thread_ts")
    files = [
        SharedFile.from_payload(f) for f in event.get("files") or [] if isinstance(f, dict) and f.get("id")
    ]
    pasted = None if files else pasted_log(str(event.get("text") or ""))
    direct = event.get("channel_type") == "im"
    key = f"message:{channel}:{ts}"
    incident = None
    if thread_ts and thread_ts != ts:
        incident = deps.store.incident_for_message(channel, str(thread_ts))
    if not files and pasted is None:
        if mentioned:
            where = MessageRef(channel, str(thread_ts or ts))
            post_once(deps.outlet, deps.store, f"hint:{key}", channel, Message(text=HINT), thread=where)
        return
    if not (mentioned or direct or (incident is not None and files)):
        return  # a file in a channel that did not ask the bot anything
    user = event.get("user")
    if incident is not None and incident.slack_channel and incident.slack_ts:
        task = DiagnoseTask(
            channel=channel,
            placeholder=None,
            placeholder_top_level=False,
            thread=MessageRef(channel, str(thread_ts)),
            user=user,
            files=tuple(files),
            pasted=pasted,
            incident_id=incident.id,
            edit=MessageRef(incident.slack_channel, incident.slack_ts),
        )
    else:
        task = DiagnoseTask(
            channel=channel,
            placeholder=None,
            placeholder_top_level=False,
            thread=MessageRef(channel, str(thread_ts or ts)),
            user=user,
            files=tuple(files),
            pasted=pasted,
        )
    deps.start_diagnosis(task, key=key)
