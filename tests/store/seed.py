"""A small seeded history whose every figure is worked out by hand in test_queries.py.

NOW is the clock the queries run at; times are given in days before NOW. The incident window is 72 h,
so occurrences further apart than that open separate incidents.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.store import IncidentRecord, Store
from tests.store.diagnoses import make_diagnosis

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

OOM = {"world_size": 8, "timeout_ms": 600_000}  # 8 GPUs x 10 min = 1.333 GPU-h
IB = {"world_size": 64, "timeout_ms": 1_800_000, "since_progress_ms": 1_800_000}  # 64 x 1 h = 64 GPU-h
RANK0 = {"world_size": 16, "timeout_ms": 1_800_000}  # 16 x 30 min = 8 GPU-h

# (key, class, host, days before NOW, facts)
OCCURRENCES: list[tuple[str, str, str | None, float, dict[str, int]]] = [
    ("oom-100", "cuda/oom", "gpu-node-017", 100, OOM),
    ("rank0-59", "timeout/rank0-only-work", None, 59, RANK0),
    ("xid-40", "hardware/gpu-xid", "gpu-node-017", 40, {}),
    ("oom-20", "cuda/oom", "gpu-node-017", 20, {"world_size": 8}),  # timeout unknown: no cost
    ("oom-10", "cuda/oom", "gpu-node-017", 10, OOM),
    ("ib-10", "network/ib-rdma", "gpu-node-020", 10, IB),
    ("ib-9", "network/ib-rdma", "gpu-node-020", 9, IB),
    ("ib-5", "network/ib-rdma", "gpu-node-020", 5, IB),
    ("oom-3", "cuda/oom", "gpu-node-017", 3, OOM),
    ("oom-2", "cuda/oom", "gpu-node-017", 2, OOM),
    ("rank0-2", "timeout/rank0-only-work", None, 2, RANK0),
    ("oom-1", "cuda/oom", "gpu-node-017", 1, OOM),
]

# (occurrence key whose incident is resolved, days before NOW, fix)
RESOLUTIONS = [
    ("xid-40", 39, "drained and RMA'd GPU"),
    ("oom-20", 19, "reseat GPU"),
    ("oom-10", 9.5, "reseat GPU"),
    ("ib-9", 8, "replaced cable"),
    ("rank0-2", 1, "raised timeout"),
]

# (host, verdict, days before NOW); recorded without a cluster, so they attach to the node known in
# exactly one cluster (west)
PROBES = [("gpu-node-017", "failed", 4), ("gpu-node-020", "healthy", 6), ("gpu-node-021", "degraded", 3)]


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def seed_history(store: Store) -> dict[str, IncidentRecord]:
    records: dict[str, IncidentRecord] = {}
    for key, class_id, host, days, facts in OCCURRENCES:
        diagnosis = make_diagnosis(class_id, host=host, signatures=(f"{class_id}-sig",), facts=dict(facts))
        records[key] = store.record_diagnosis(diagnosis, input_digest=key, cluster="west", now=ago(days))
    for key, days, fix in RESOLUTIONS:
        store.resolve_incident(records[key].id, "alice", fix, now=ago(days))
    for host, verdict, days in PROBES:
        store.record_probe_run({"verdict": verdict, "reasons": []}, node=host, started=ago(days))
    return records
