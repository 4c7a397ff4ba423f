"""Outlets for digest tests that run in several processes."""

from __future__ import annotations

import fcntl
import json
import time
from pathlib import Path
from typing import Any

from bot.services.outlet import Message, MessageRef


class FileOutlet:
    """Every post appended as one JSON line to a shared file (under an exclusive lock), so that a test
    can count what several processes posted in total."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def post(
        self, channel: str, message: Message, *, thread: MessageRef | None = None, key: str | None = None
    ) -> MessageRef:
        ref = MessageRef(channel, f"{time.time():.6f}")
        line = {
            "channel": channel,
            "ts": ref.ts,
            "key": key,
            "text": message.text,
            "files": [f.filename for f in message.files],
        }
        with self.path.open("a") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            file.write(json.dumps(line) + "\n")
        return ref

    def update(self, ref: MessageRef, message: Message) -> None:
        raise AssertionError("the digest never edits a message")

    def posts(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]
