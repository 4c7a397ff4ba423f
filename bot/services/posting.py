"""Posting exactly once, although workers can die between posting and recording that they posted.

`post_once` looks the idempotency key up in the store first (the common retry: the post was recorded),
then posts with the key (an outlet that can, such as Slack with message metadata, finds a post that
was made but not recorded), then records it. Keys name what is posted, e.g. `job-failed/c1/1234/0:top`.
"""

from __future__ import annotations

from bot.services.outlet import Message, MessageRef, Outlet
from bot.store import Store


def post_once(
    outlet: Outlet,
    store: Store,
    key: str,
    channel: str,
    message: Message,
    *,
    thread: MessageRef | None = None,
) -> MessageRef:
    earlier = store.message_for_key(key)
    if earlier is not None:
        return MessageRef(channel=earlier.channel, ts=earlier.ts)
    ref = outlet.post(channel, message, thread=thread, key=key)
    recorded = store.remember_message(key, ref.channel, ref.ts, thread_ts=thread.ts if thread else None)
    return MessageRef(channel=recorded.channel, ts=recorded.ts)
