"""One regex time budget per diagnosis, shared by every source, archive member and worker process.

Each signature regex runs with a timeout (`REGEX_TIMEOUT_S`), so no single line can hang a scan. A hostile
input can still repeat such a line: the budget caps the time-outs a diagnosis may pay, per signature and in
all, after which a signature that keeps timing out is simply not tried again. The counts live in shared
memory when worker processes scan parts of the input, so twenty archive members or two workers do not
multiply the budget (each scanning process checks the count before a regex runs, so N of them may overshoot a
cap by N - 1 time-outs).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable
from multiprocessing.context import BaseContext
from typing import Any

# Seconds one regex may spend on one line; a pathological line then simply does not match.
REGEX_TIMEOUT_S = 0.05
# Time-outs allowed per signature, and in all, in one diagnosis (at most TOTAL * REGEX_TIMEOUT_S seconds).
PER_SIGNATURE = 20
TOTAL = 60


class RegexBudget:
    """`shared`: in shared memory, for worker processes started from `context` (the default context of
    multiprocessing unless given; a lock made for forked processes cannot go to a fork server's)."""

    def __init__(
        self, signature_ids: Iterable[str], *, shared: bool = False, context: BaseContext | None = None
    ) -> None:
        self._index = {signature_id: i for i, signature_id in enumerate(signature_ids)}
        size = len(self._index) + 1  # the last slot counts all time-outs
        if shared and context is None:
            context = multiprocessing.get_context()
        self.context = context
        self._counts: Any = self.context.RawArray("i", size) if self.context else [0] * size
        self._lock: Any = self.context.Lock() if self.context else None

    @property
    def shared(self) -> bool:
        return self._lock is not None

    def allows(self, signature_id: str) -> bool:
        index = self._index.get(signature_id)
        if index is None:
            return self._counts[-1] < TOTAL
        return self._counts[index] < PER_SIGNATURE and self._counts[-1] < TOTAL

    def spend(self, signature_id: str) -> None:
        """One time-out of `signature_id` happened."""
        index = self._index.get(signature_id)
        if self._lock is None:
            self._bump(index)
            return
        with self._lock:
            self._bump(index)

    def _bump(self, index: int | None) -> None:
        if index is not None:
            self._counts[index] += 1
        self._counts[-1] += 1

    def spent(self) -> int:
        """Time-outs paid so far in this diagnosis."""
        return int(self._counts[-1])
