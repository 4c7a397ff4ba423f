"""The figures of `ncclbot report` and the weekly digest: recurrence per class and per node against the
previous period, lemon nodes, GPU-hours lost, time to resolve and whether fixes held."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any


def _row(item: Any, *properties: str) -> dict[str, Any]:
    document = asdict(item)
    document.update({name: getattr(item, name) for name in properties})
    return document


def collect(store: Any, *, days: int, now: datetime) -> dict[str, Any]:
    return {
        "days": days,
        "as_of": now.isoformat().replace("+00:00", "Z"),
        "recurrence_by_class": [
            _row(r, "change", "trend") for r in store.recurrence(by="class", days=days, now=now)
        ],
        "recurrence_by_node": [
            _row(r, "change", "trend") for r in store.recurrence(by="node", days=days, now=now)
        ],
        "lemon_nodes": [_row(n, "score", "is_lemon") for n in store.lemon_nodes(days=days, now=now)],
        "gpu_hours_lost_by_class": [asdict(r) for r in store.gpu_hours_lost(by="class", days=days, now=now)],
        "mttr": [asdict(r) for r in store.mttr(days=days, now=now)],
        "fix_effectiveness": [_row(f, "held_rate") for f in store.fix_effectiveness(now=now)],
    }
