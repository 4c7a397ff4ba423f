"""An outlet that appends every message to a JSON-lines file: for a deployment without a Slack
workspace yet (a log shipper can forward the file), and for tests that watch a server process from
outside. Several processes may share one file: each line is written under an exclusive lock.

It does not look earlier posts up by key (Slack's outlet does, through message metadata), so a crash
between a post and its record in the store can repeat that one message.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from dataclasses import asdict
from pathlib import Path

from bot.services.outlet import Message, MessageRef


class FileOutlet:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def post(
        self, channel: str, message: Message, *, thread: MessageRef | None = None, key: str | None = None
    ) -> MessageRef:
        ref = MessageRef(channel=channel, ts=f"{time.time():.6f}")
        self._append(
            {
                "op": "post",
                "channel": channel,
                "ts": ref.ts,
                "thread_ts": thread.ts if thread else None,
                "key": key,
                "text": message.text,
                "blocks": list(message.blocks),
                "files": [
                    {"filename": f.filename, "title": f.title, "bytes": len(f.content)} for f in message.files
                ],
                "pid": os.getpid(),
            }
        )
        return ref

    def update(self, ref: MessageRef, message: Message) -> None:
        self._append({"op": "update", **asdict(ref), "text": message.text, "blocks": list(message.blocks)})

    def _append(self, record: dict[str, object]) -> None:
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        with self._lock, self.path.open("ab") as out:
            fcntl.flock(out, fcntl.LOCK_EX)  # other processes sharing the file
            try:
                out.write(line)
                out.flush()
                os.fsync(out.fileno())
            finally:
                fcntl.flock(out, fcntl.LOCK_UN)
