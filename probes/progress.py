"""Progress lines: how ranks tell whoever launched them where they are, through stderr.

Every rank writes `ncclbot-probe: {json}` lines to stderr. They survive any launcher (a local
subprocess, ssh, srun, kubectl logs), so the launcher can both show progress and, when the probe never
prints its result, name the ranks that never checked in. Stdlib only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

PREFIX = "ncclbot-probe: "

ProgressCallback = Callable[[str], None]


def emit(event: str, **fields: Any) -> None:
    """Write one progress line to stderr (flushed: a rank may be killed right after)."""
    record = {"event": event, **fields}
    sys.stderr.write(PREFIX + json.dumps(record, sort_keys=True) + "\n")
    sys.stderr.flush()


def parse(line: str) -> dict[str, Any] | None:
    """The event carried by a stderr line, or None for any other line (torch warnings, tracebacks)."""
    start = line.find(PREFIX)
    if start < 0:
        return None
    try:
        record = json.loads(line[start + len(PREFIX) :])
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and "event" in record else None


def describe(record: dict[str, Any]) -> str:
    """One human line for a progress event (what a terminal or a chat thread shows)."""
    event = record.get("event")
    rank = record.get("rank")
    where = f"rank {rank}" + (f" on {record['host']}" if record.get("host") else "")
    if event == "arrived":
        return f"{where} arrived"
    if event == "initialized":
        return f"{where} joined the {record.get('backend', '?')} process group"
    if event == "size":
        size = human_bytes(int(record.get("bytes", 0)))
        return f"allreduce {size}: {record.get('busbw_gbps', 0):.2f} GB/s busbw"
    if event == "sendrecv":
        return "ring send/recv pass done"
    if event == "done":
        return f"{where} finished"
    if event == "error":
        return f"{where} failed: {record.get('error', '?')}"
    if event == "verdict":
        return f"verdict: {record.get('verdict', '?')}"
    return f"{where}: {event}"


class Tracker:
    """Feeds progress lines to a callback and remembers which ranks arrived and finished."""

    def __init__(self, on_progress: ProgressCallback | None = None) -> None:
        self.on_progress = on_progress
        self.arrived: dict[int, str | None] = {}
        self.finished: set[int] = set()
        self.errors: dict[int, str] = {}
        self.world_size: int | None = None

    def feed(self, line: str) -> None:
        record = parse(line)
        if record is None:
            return
        rank = record.get("rank")
        if isinstance(rank, int):
            if record["event"] == "arrived":
                self.arrived[rank] = record.get("host")
                if isinstance(record.get("world_size"), int):
                    self.world_size = record["world_size"]
            elif record["event"] == "done":
                self.finished.add(rank)
            elif record["event"] == "error":
                self.errors[rank] = str(record.get("error", ""))
        if self.on_progress is not None:
            self.on_progress(describe(record))

    def missing(self, world_size: int | None = None) -> list[int]:
        size = world_size if world_size is not None else self.world_size
        if size is None:
            return []
        return [rank for rank in range(size) if rank not in self.arrived]


def human_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"
