"""The message shortcut "Diagnose with NCCL bot": on any message with files or a pasted log."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, Respond

from bot.services.outlet import MessageRef
from bot.slack.deps import SlackDeps
from bot.slack.files import SharedFile
from bot.slack.listeners.events import pasted_log
from bot.slack.middleware import actor_of, audited, channel_of

CALLBACK_ID = "diagnose_message"


def files_of(message: dict[str, Any]) -> list[SharedFile]:
    """The message's files, and those of messages forwarded into it (attachments)."""
    found = [SharedFile.from_payload(f) for f in message.get("files") or [] if f.get("id")]
    for attachment in message.get("attachments") or []:
        found += [SharedFile.from_payload(f) for f in attachment.get("files") or [] if f.get("id")]
    return found


def register(app: App, deps: SlackDeps) -> None:
    @app.shortcut(CALLBACK_ID)
    @audited(deps.store, "shortcut diagnose")
    def diagnose_message(ack: Ack, body: dict[str, Any], respond: Respond) -> str:
        message = body.get("message") or {}
        channel = str(channel_of(body))
        files = files_of(message)
        pasted = None if files else pasted_log(str(message.get("text") or ""))
        if not files and pasted is None:
            ack()
            respond(
                text="That message has no log files and no pasted log to diagnose.", response_type="ephemeral"
            )
            return "nothing to read"
        ts = str(message.get("ts"))
        thread_ts = message.get("thread_ts")
        user = actor_of(body)
        key = f"shortcut:{channel}:{ts}:{body.get('trigger_id')}"
        incident = (
            deps.store.incident_for_message(channel, str(thread_ts))
            if thread_ts and thread_ts != ts
            else None
        )
        # Committed before the acknowledgement: an acknowledged shortcut is never lost.
        if incident is not None and incident.slack_channel and incident.slack_ts:
            deps.accept(
                key,
                channel,
                thread=MessageRef(channel, str(thread_ts)),
                user=user,
                files=files,
                pasted=pasted,
                incident_id=incident.id,
                edit=MessageRef(incident.slack_channel, incident.slack_ts),
            )
            ack()
            return f"joined incident {incident.id}"
        deps.accept(
            key,
            channel,
            thread=MessageRef(channel, str(thread_ts or ts)),
            user=user,
            files=files,
            pasted=pasted,
        )
        ack()
        return "queued"
