"""A progress bar on stderr while large inputs are read (only on a terminal, only when worth it)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

# Below this much input a diagnosis takes well under a second: a bar would only flicker.
SHOW_ABOVE_BYTES = 64 * 1024**2


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def on_disk_size(paths: Sequence[str]) -> int:
    total = 0
    for path in paths:
        if path == "-":
            continue
        if os.path.isdir(path):
            for folder, _dirs, files in os.walk(path):
                total += sum(_size(os.path.join(folder, name)) for name in files)
        else:
            total += _size(path)
    return total


@contextmanager
def input_progress(paths: Sequence[str], *, enabled: bool = True) -> Iterator[Callable[[int], None] | None]:
    """Yields a `progress(bytes_done)` callback, or None when no bar should be shown.

    The total is the size on disk; compressed inputs decompress to more, so the bar then runs
    without a total rather than lying about the end."""
    total = on_disk_size(paths)
    if not enabled or not sys.stderr.isatty() or total < SHOW_ABOVE_BYTES:
        yield None
        return
    compressed = any(p.endswith((".gz", ".tgz", ".zst", ".zip")) for p in paths)
    columns = [
        TextColumn("reading logs"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("read", total=None if compressed else total)

        def advance(done: int) -> None:
            bar.update(task, completed=done)

        yield advance
