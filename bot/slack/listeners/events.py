"""Messages that carry logs: an @mention or a DM with files (or a pasted log), and files posted in an
incident's thread (they join its bundle and the diagnosis is made again). Slack may deliver one upload
as both `app_mention` and `message`/`file_share`: the message's (channel, ts) is taken once."""

from __future__ import annotations

import re
from typing import Any

from slack_bolt import App

from bot.services.outlet import MessageRef
from bot.slack.deps import SlackDeps
from bot.slack.files import SharedFile

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


def register(app: App, deps: SlackDeps) -> None:
    @app.event("app_mention")
    def mention(event: dict[str, Any]) -> None:
        take_message(deps, event, mentioned=True)

    @app.event({"type": "message", "subtype": "file_share"})
    def file_share(event: dict[str, Any]) -> None:
        take_message(deps, event, mentioned=False)

    @app.event("message")
    def other_message() -> None:
        """Other messages (chatter, edits, the bot's own posts and uploads) concern nobody here; the app
        subscribes to no `file_shared` event, so its own report uploads never loop back."""


def take_message(deps: SlackDeps, event: dict[str, Any], *, mentioned: bool) -> None:
    if event.get("bot_id"):
        return
    channel, ts = str(event.get("channel")), str(event.get("ts"))
    thread_ts = event.get("thread_ts")
    files = [SharedFile.from_payload(f) for f in event.get("files") or [] if f.get("id")]
    pasted = None if files else pasted_log(str(event.get("text") or ""))
    direct = event.get("channel_type") == "im"
    incident = None
    if thread_ts and thread_ts != ts:
        incident = deps.store.incident_for_message(channel, str(thread_ts))
    if not files and pasted is None:
        if mentioned:
            from bot.services.outlet import Message

            deps.outlet.post(channel, Message(text=HINT), thread=MessageRef(channel, str(thread_ts or ts)))
        return
    if not (mentioned or direct or (incident is not None and files)):
        return  # a file in a channel that did not ask the bot anything
    if not deps.store.mark_processed(f"message:{channel}:{ts}"):
        return  # the same message through the other event type
    if incident is not None and incident.slack_channel and incident.slack_ts:
        deps.start_diagnosis(
            channel,
            thread=MessageRef(channel, str(thread_ts)),
            user=event.get("user"),
            files=files,
            pasted=pasted,
            incident_id=incident.id,
            edit=MessageRef(incident.slack_channel, incident.slack_ts),
            key=f"message:{channel}:{ts}",
        )
        return
    deps.start_diagnosis(
        channel,
        thread=MessageRef(channel, str(thread_ts or ts)),
        user=event.get("user"),
        files=files,
        pasted=pasted,
        key=f"message:{channel}:{ts}",
    )
