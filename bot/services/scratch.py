"""Folders for files the bot writes while it works on one request (downloads, inline logs, fetched pod
logs). A request retried after a crash gets the same folder back, emptied: its files keep their paths,
so the retry is recognised as the same input (stored once, not a repeat of itself), and nothing the
crashed attempt wrote is left behind."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path


def empty_folder(base: Path | None, what: str, key: str = "") -> Path:
    """An empty folder `ncclbot-<what>-...` under `base` (the temporary directory when None): the same
    one for the same `key` (a queued task's or an event's), a new one when `key` is empty."""
    root = base if base is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    if not key:
        return Path(tempfile.mkdtemp(prefix=f"ncclbot-{what}-", dir=root))
    folder = root / f"ncclbot-{what}-{hashlib.sha256(key.encode()).hexdigest()[:20]}"
    shutil.rmtree(folder, ignore_errors=True)  # what a crashed attempt left
    folder.mkdir(mode=0o700)
    return folder
