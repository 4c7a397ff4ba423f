"""The side channel through the rendezvous TCPStore: per-rank check-in, phase, result and error.

Ranks post here instead of through collectives so that rank 0's coordinator can still read everything
when a collective is stuck; the coordinator polls it against the deadline and names the ranks that
never arrived or never finished.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import torch.distributed as dist

PREFIX = "ncclbot-probe/"
ARRIVED = PREFIX + "arrived/"
PHASE = PREFIX + "phase/"
FINAL = PREFIX + "final/"
ERROR = PREFIX + "error/"
CHECKS = PREFIX + "checks/"
FINISHED_COUNT = PREFIX + "finished"
ERROR_COUNT = PREFIX + "errors"

Outcome = Literal["finished", "errors", "deadline"]


class Sideband:
    def __init__(self, store: dist.Store) -> None:
        self.store = store
        # Every rank goes through the same phases in the same order, so the count says how far it got.
        self.steps = 0

    def _put(self, key: str, value: Any) -> None:
        self.store.set(key, json.dumps(value))

    def _get(self, key: str) -> Any:
        if not self.store.check([key]):
            return None
        return json.loads(self.store.get(key).decode())

    def arrive(self, rank: int, info: dict[str, Any]) -> None:
        self._put(ARRIVED + str(rank), info)
        self.phase(rank, "arrived")

    def phase(self, rank: int, phase: str) -> None:
        self.steps += 1
        self._put(PHASE + str(rank), {"step": self.steps, "name": phase})

    def post_checks(self, rank: int, checks: list[dict[str, Any]]) -> None:
        self._put(CHECKS + str(rank), checks)

    def finish(self, rank: int, payload: dict[str, Any]) -> None:
        self._put(FINAL + str(rank), payload)
        self.phase(rank, "done")
        self.store.add(FINISHED_COUNT, 1)

    def fail(self, rank: int, message: str) -> None:
        self._put(ERROR + str(rank), message)
        self.store.add(ERROR_COUNT, 1)

    def counts(self) -> tuple[int, int]:
        return self.store.add(FINISHED_COUNT, 0), self.store.add(ERROR_COUNT, 0)

    def snapshot(self, world_size: int) -> list[RankReport]:
        reports = []
        for rank in range(world_size):
            phase = self._get(PHASE + str(rank)) or {}
            reports.append(
                RankReport(
                    rank=rank,
                    info=self._get(ARRIVED + str(rank)),
                    phase=phase.get("name"),
                    step=phase.get("step"),
                    final=self._get(FINAL + str(rank)),
                    error=self._get(ERROR + str(rank)),
                    checks=self._get(CHECKS + str(rank)) or [],
                )
            )
        return reports


@dataclass(slots=True)
class RankReport:
    rank: int
    info: dict[str, Any] | None
    phase: str | None
    step: int | None
    final: dict[str, Any] | None
    error: str | None
    checks: list[dict[str, Any]] = field(default_factory=list)


def wait_for_outcome(
    sideband: Sideband,
    world_size: int,
    deadline_at: float,
    *,
    error_grace_s: float = 3.0,
    poll_s: float = 0.1,
) -> Outcome:
    """Block until every rank finished, or errors settled, or the deadline, and say which."""
    first_error: float | None = None
    while True:
        finished, errors = sideband.counts()
        if finished >= world_size:
            return "finished"
        now = time.monotonic()
        if errors:
            first_error = first_error or now
            # After an error the others usually block in a collective until their timeout: give them a
            # moment to report their own error or result, then stop waiting.
            if finished + errors >= world_size or now - first_error >= error_grace_s:
                return "errors"
        if now >= deadline_at:
            return "deadline"
        time.sleep(poll_s)
