"""Where messages go: an injected outlet, so that the webhook, the digest and incident actions are
testable without Slack and the store never learns what Slack is.

An outlet has two jobs: post a message (top level, or into a thread) and update one it posted. Messages
carry a plain-text fallback, Block Kit blocks built by `bot.render` (pure data: dicts) and optional files
for the thread. `bot.slack.outlet` posts to Slack's Web API; `InMemoryOutlet` keeps everything in lists
for tests and for `--preview` style front ends.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class MessageRef:
    """A posted message: its channel and timestamp (Slack's `ts` is its id within the channel)."""

    channel: str
    ts: str


@dataclass(frozen=True, slots=True)
class FileUpload:
    """A file attached to a message (a full report, a chart): posted into the message's thread."""

    filename: str
    content: bytes
    title: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    """`text` is the notification / accessibility fallback; `blocks` the Block Kit layout."""

    text: str
    blocks: tuple[dict[str, Any], ...] = ()
    files: tuple[FileUpload, ...] = ()


class Outlet(Protocol):
    def post(
        self, channel: str, message: Message, *, thread: MessageRef | None = None, key: str | None = None
    ) -> MessageRef:
        """Post `message` to `channel` (into `thread` when given); files go into the message's thread.

        `key` is an idempotency key: an outlet that can look messages up by it (Slack message metadata)
        returns the earlier message instead of posting twice after a crash between post and commit."""
        ...

    def update(self, ref: MessageRef, message: Message) -> None:
        """Replace the text and blocks of a message this outlet posted (files are not touched)."""
        ...


@dataclass(slots=True)
class PostedMessage:
    ref: MessageRef
    message: Message
    thread: MessageRef | None
    key: str | None
    updates: list[Message] = field(default_factory=list)

    @property
    def current(self) -> Message:
        return self.updates[-1] if self.updates else self.message


class InMemoryOutlet:
    """The test double: remembers every post and update, in order; thread-safe."""

    def __init__(self) -> None:
        self.posted: list[PostedMessage] = []
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def post(
        self, channel: str, message: Message, *, thread: MessageRef | None = None, key: str | None = None
    ) -> MessageRef:
        with self._lock:
            if key is not None:
                for earlier in self.posted:
                    if earlier.key == key:
                        return earlier.ref
            ref = MessageRef(channel=channel, ts=f"{1_700_000_000 + next(self._counter)}.000100")
            self.posted.append(PostedMessage(ref=ref, message=message, thread=thread, key=key))
            return ref

    def update(self, ref: MessageRef, message: Message) -> None:
        with self._lock:
            for posted in self.posted:
                if posted.ref == ref:
                    posted.updates.append(message)
                    return
        raise KeyError(f"no message {ref.ts} in {ref.channel}")

    def top_level(self, channel: str | None = None) -> list[PostedMessage]:
        return [p for p in self.posted if p.thread is None and (channel is None or p.ref.channel == channel)]

    def replies(self, parent: MessageRef) -> list[PostedMessage]:
        return [p for p in self.posted if p.thread == parent]
