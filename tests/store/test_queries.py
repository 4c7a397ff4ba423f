"""The product's queries over the seeded history of tests/store/seed.py; every expected figure is
derived by hand there."""

from __future__ import annotations

import pytest

from bot.store import Store
from tests.store.seed import NOW, seed_history


@pytest.fixture
def seeded(store: Store) -> Store:
    records = seed_history(store)
    # Grouping: the two IB occurrences a day apart share an incident, nothing else does.
    assert records["ib-9"].id == records["ib-10"].id and records["ib-9"].occurrences == 2
    assert records["oom-2"].id == records["oom-3"].id == records["oom-1"].id
    assert records["oom-1"].occurrences == 3
    assert len({r.id for r in records.values()}) == 9
    return store


def _rows(rows: list) -> list[tuple]:
    return [(r.key, r.count, r.previous, r.trend) for r in rows]


def test_recurrence_per_class_with_trend(seeded: Store) -> None:
    assert _rows(seeded.recurrence(by="class", days=7, now=NOW)) == [
        ("cuda/oom", 3, 1, "up"),
        ("network/ib-rdma", 1, 2, "down"),
        ("timeout/rank0-only-work", 1, 0, "new"),
    ]
    assert _rows(seeded.recurrence(by="class", days=30, now=NOW)) == [
        ("cuda/oom", 5, 0, "new"),
        ("network/ib-rdma", 3, 0, "new"),
        ("timeout/rank0-only-work", 1, 1, "flat"),
        ("hardware/gpu-xid", 0, 1, "down"),
    ]
    assert _rows(seeded.recurrence(by="class", days=90, now=NOW)) == [
        ("cuda/oom", 5, 1, "up"),
        ("network/ib-rdma", 3, 0, "new"),
        ("timeout/rank0-only-work", 2, 0, "new"),
        ("hardware/gpu-xid", 1, 0, "new"),
    ]


def test_recurrence_per_node(seeded: Store) -> None:
    rows = seeded.recurrence(by="node", days=7, now=NOW)
    assert [(r.key, r.cluster, r.count, r.previous, r.change) for r in rows] == [
        ("gpu-node-017", "west", 3, 1, 2),
        ("gpu-node-020", "west", 1, 2, -1),
    ]
    assert _rows(seeded.recurrence(by="node", days=30, now=NOW)) == [
        ("gpu-node-017", 5, 1, "up"),
        ("gpu-node-020", 3, 0, "new"),
    ]


def test_recurrence_report_covers_both_groupings_and_periods(seeded: Store) -> None:
    from bot.store.queries import recurrence_report

    with seeded._read() as session:
        report = recurrence_report(session, now=NOW)
    assert {by: sorted(periods) for by, periods in report.items()} == {
        "class": [7, 30, 90],
        "node": [7, 30, 90],
    }
    assert report["node"][7] == seeded.recurrence(by="node", days=7, now=NOW)


def test_lemon_nodes(seeded: Store) -> None:
    lemons = seeded.lemon_nodes(days=30, now=NOW)
    assert [
        (n.hostname, n.incidents, n.occurrences, n.probe_runs, n.failed_probes, n.score, n.is_lemon)
        for n in lemons
    ] == [
        ("gpu-node-017", 3, 5, 1, 1, 5.0, True),
        ("gpu-node-020", 2, 3, 1, 0, 2.0, True),
        ("gpu-node-021", 0, 0, 1, 0, 0.5, False),
    ]


def test_gpu_hours_lost(seeded: Store) -> None:
    by_class = seeded.gpu_hours_lost(by="class", days=30, now=NOW)
    assert [(r.key, round(r.gpu_hours, 3), r.occurrences, r.estimated) for r in by_class] == [
        ("network/ib-rdma", 192.0, 3, 3),
        ("timeout/rank0-only-work", 8.0, 1, 1),
        ("cuda/oom", 5.333, 5, 4),
    ]
    by_node = seeded.gpu_hours_lost(by="node", days=7, now=NOW)
    assert [(r.key, round(r.gpu_hours, 3), r.occurrences) for r in by_node] == [
        ("gpu-node-020", 64.0, 1),
        ("gpu-node-017", 4.0, 3),
    ]


def test_mttr(seeded: Store) -> None:
    rows = seeded.mttr(days=30, now=NOW)
    assert [(r.key, r.resolved, r.mean_hours, r.median_hours) for r in rows] == [
        ("all", 4, 27.0, 24.0),
        ("cuda/oom", 2, 18.0, 18.0),
        ("network/ib-rdma", 1, 48.0, 48.0),
        ("timeout/rank0-only-work", 1, 24.0, 24.0),
    ]
    assert [(r.key, r.resolved) for r in seeded.mttr(days=60, now=NOW)][:2] == [("all", 5), ("cuda/oom", 2)]


def test_fix_effectiveness(seeded: Store) -> None:
    rows = seeded.fix_effectiveness(now=NOW)
    assert [(f.fix, f.resolutions, f.held, f.recurred, f.pending, f.held_rate) for f in rows] == [
        ("reseat GPU", 2, 0, 2, 0, 0.0),
        ("drained and RMA'd GPU", 1, 1, 0, 0, 1.0),
        ("raised timeout", 1, 0, 0, 1, None),
        ("replaced cable", 1, 0, 1, 0, 0.0),
    ]


def test_history_filters(seeded: Store) -> None:
    on_node = seeded.history(days=30, node="GPU-NODE-017.cluster.local", now=NOW)
    assert [round((NOW - o.occurred_at).total_seconds() / 86400) for o in on_node] == [1, 2, 3, 10, 20]
    assert {o.host for o in on_node} == {"gpu-node-017"}
    ib = seeded.history(days=7, class_id="network/ib-rdma", now=NOW)
    assert [(o.host, round(o.gpu_hours_lost or 0)) for o in ib] == [("gpu-node-020", 64)]
    assert seeded.history(days=30, node="gpu-node-999", now=NOW) == []


def test_open_incidents(seeded: Store) -> None:
    open_ones = seeded.incidents(open_only=True)
    assert [(i.class_id, i.occurrences) for i in open_ones] == [
        ("cuda/oom", 3),
        ("network/ib-rdma", 1),
        ("timeout/rank0-only-work", 1),
        ("cuda/oom", 1),
    ]
    assert len(seeded.incidents()) == 9
