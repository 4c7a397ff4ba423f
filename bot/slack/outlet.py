"""`SlackOutlet`: the Outlet protocol (bot.services.outlet) over Slack's Web API.

Posts carry message metadata with their idempotency key (`event_type` "ncclbot_post"), so that a post
retried after a crash between "posted" and "committed" finds the earlier message through
conversations.history / conversations.replies instead of posting twice. Files go into the message's
thread with files_upload_v2 (the three-step upload).
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.services.outlet import Message, MessageRef
from bot.settings import Settings
from bot.slack.client import make_client

log = logging.getLogger("ncclbot.slack.outlet")

METADATA_EVENT = "ncclbot_post"
# How far back a keyed post looks for its earlier self: a retry comes soon after the first attempt.
HISTORY_LOOKBACK = 100


class SlackOutlet:
    def __init__(self, client: WebClient) -> None:
        self.client = client

    @classmethod
    def from_settings(cls, settings: Settings) -> SlackOutlet:
        return cls(make_client(settings))

    def post(
        self, channel: str, message: Message, *, thread: MessageRef | None = None, key: str | None = None
    ) -> MessageRef:
        if key is not None:
            earlier = self.find(channel, key, thread=thread)
            if earlier is not None:
                return earlier
        arguments: dict[str, Any] = {
            "channel": channel,
            "text": message.text,
            "unfurl_links": False,
            "unfurl_media": False,
        }
        if message.blocks:
            arguments["blocks"] = list(message.blocks)
        if thread is not None:
            arguments["thread_ts"] = thread.ts
        if key is not None:
            arguments["metadata"] = {"event_type": METADATA_EVENT, "event_payload": {"key": key}}
        response = self.client.chat_postMessage(**arguments)
        ref = MessageRef(channel=str(response["channel"]), ts=str(response["ts"]))
        for upload in message.files:
            self.client.files_upload_v2(
                channel=ref.channel,
                thread_ts=(thread or ref).ts,
                content=upload.content,
                filename=upload.filename,
                title=upload.title or upload.filename,
            )
        return ref

    def update(self, ref: MessageRef, message: Message) -> None:
        self.client.chat_update(
            channel=ref.channel, ts=ref.ts, text=message.text, blocks=list(message.blocks) or []
        )

    def find(self, channel: str, key: str, *, thread: MessageRef | None = None) -> MessageRef | None:
        """The message posted earlier with idempotency `key`, if Slack still shows it; None also when
        the lookup itself fails (missing history scope): posting then is the lesser harm."""
        try:
            if thread is not None:
                response = self.client.conversations_replies(
                    channel=channel, ts=thread.ts, include_all_metadata=True, limit=HISTORY_LOOKBACK
                )
            else:
                response = self.client.conversations_history(
                    channel=channel, include_all_metadata=True, limit=HISTORY_LOOKBACK
                )
        except SlackApiError as error:
            log.warning("cannot look up earlier posts in %s: %s", channel, error.response.get("error"))
            return None
        for item in response.get("messages") or []:
            metadata = item.get("metadata") or {}
            if (
                metadata.get("event_type") == METADATA_EVENT
                and (metadata.get("event_payload") or {}).get("key") == key
            ):
                return MessageRef(channel=channel, ts=str(item["ts"]))
        return None
