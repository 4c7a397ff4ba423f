"""The digest of a seeded history (tests/digest/history.py): every number checked was worked out by
hand from the seed. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from bot.model.digest import Digest
from bot.services.digest import build_digest, compose
from bot.services.report import collect
from bot.store import Store
from tests.digest.history import NOW, WEEK, seed_digest_history


@pytest.fixture
def digest_and_figures(store: Store) -> tuple[Digest, dict[str, object]]:
    seed_digest_history(store)
    figures, digest = build_digest(store, week=WEEK, channel="C0DIGEST", as_of=NOW, stale_days=7)
    return digest, figures


def test_classes_this_week_against_last_with_trend_and_cost(digest_and_figures: tuple[Digest, dict]) -> None:
    digest, _ = digest_and_figures
    rows = [(c.class_id, c.count, c.previous, c.trend, round(c.gpu_hours, 2)) for c in digest.classes]
    assert rows == [
        ("cuda/oom", 3, 1, "up", 4.0),  # oom-3, oom-2, oom-1 at 8 GPUs x 10 min each; oom-10 before
        ("unknown", 2, 0, "new", 0.0),
        ("network/ib-rdma", 1, 2, "down", 64.0),  # ib-5 (64 GPUs x 1 h); ib-10 and ib-9 before
        ("timeout/rank0-only-work", 1, 0, "new", 8.0),
    ]
    assert (digest.total, digest.total_previous, digest.gpu_hours) == (7, 3, 76.0)


def test_recurring_fingerprints_lemons_and_stale_incidents(digest_and_figures: tuple[Digest, dict]) -> None:
    digest, _ = digest_and_figures
    [oom] = digest.fingerprints  # the only fingerprint seen twice or more this week
    assert (oom.class_id, oom.count, oom.previous, oom.incidents, oom.hosts) == (
        "cuda/oom",
        3,
        1,
        1,  # 3, 2 and 1 days ago are within 72 h of each other: one incident
        ("gpu-node-017",),
    )
    [lemon] = digest.lemons  # one incident plus a failed probe 4 days ago
    assert (lemon.hostname, lemon.cluster, lemon.score, lemon.failed_probes) == (
        "gpu-node-017",
        "west",
        3.0,
        1,
    )
    stale = [(s.class_id, s.age_days) for s in digest.stale]
    assert stale == [("cuda/oom", 100), ("timeout/rank0-only-work", 59)]  # never resolved


def test_time_to_resolve_and_fixes_that_held(digest_and_figures: tuple[Digest, dict]) -> None:
    digest, _ = digest_and_figures
    # rank0-2 resolved a day after it began; the other resolutions fall before this week
    assert [(r.key, r.resolved, r.median_hours) for r in digest.resolve] == [
        ("all", 1, 24.0),
        ("timeout/rank0-only-work", 1, 24.0),
    ]
    fixes = {f.fix: (f.held, f.recurred, f.pending) for f in digest.fixes}
    assert fixes == {
        "drained and RMA'd GPU": (1, 0, 0),  # the Xid never came back
        "reseat GPU": (0, 2, 0),  # oom-10 came 9 days after the first, oom-3 6.5 days after the second
        "replaced cable": (0, 1, 0),  # ib-5, 3 days after
        "raised timeout": (0, 0, 1),  # a day ago: inside the 14 days
    }


def test_what_the_bot_learned(digest_and_figures: tuple[Digest, dict]) -> None:
    digest, _ = digest_and_figures
    assert [(c.given, c.corrected, c.user, c.note) for c in digest.corrections] == [
        ("cuda/oom", "system/host-oom", "U0ALICE", "dmesg shows the cgroup OOM killer"),
        ("network/ib-rdma", None, "U0BOB", None),
    ]  # U0CAROL's was the week before; U0DAVE agreed
    metadata, shard = digest.residue
    assert metadata.template == "Failed to reach metadata service at <IP> from <HOST> after <NUM> retries"
    assert (metadata.occurrences, metadata.lines, metadata.classes) == (2, 3, ("unknown",))
    assert shard.template == "Checkpoint shard <HEX> checksum mismatch on rank <NUM>"
    assert (shard.occurrences, shard.lines) == (1, 1)


def test_chart_grids_cover_eight_weeks_and_nodes(digest_and_figures: tuple[Digest, dict]) -> None:
    digest, _ = digest_and_figures
    assert digest.weekly.columns == tuple(f"2026-W{w}" for w in range(41, 49))
    weekly = dict(zip(digest.weekly.rows, digest.weekly.cells, strict=True))
    assert weekly["cuda/oom"] == (0, 0, 0, 0, 0, 1, 1, 3)  # oom-20, oom-10, then this week's three
    assert weekly["hardware/gpu-xid"] == (0, 0, 1, 0, 0, 0, 0, 0)  # xid-40
    assert "timeout/rank0-only-work" in weekly  # rank0-59 is older than 8 weeks; rank0-2 counts
    assert weekly["timeout/rank0-only-work"] == (0, 0, 0, 0, 0, 0, 0, 1)
    heat = {
        (node, class_id): count
        for node, row in zip(digest.heatmap.rows, digest.heatmap.cells, strict=True)
        for class_id, count in zip(digest.heatmap.columns, row, strict=True)
        if count
    }
    assert heat == {
        ("gpu-node-017 (west)", "cuda/oom"): 5,
        ("gpu-node-017 (west)", "hardware/gpu-xid"): 1,
        ("gpu-node-020 (west)", "network/ib-rdma"): 3,
        ("gpu-node-021 (west)", "unknown"): 1,
    }


def test_figures_carry_the_report_figures_of_the_window(store: Store) -> None:
    seed_digest_history(store)
    figures, _ = build_digest(store, week=WEEK, channel=None, as_of=NOW, stale_days=7)
    report = collect(store, days=7, now=NOW)
    assert {key: figures[key] for key in report} == report
    assert (figures["week"], figures["channel"]) == (WEEK, None)


def test_composition_depends_on_the_figures_alone(digest_and_figures: tuple[Digest, dict]) -> None:
    digest, figures = digest_and_figures
    assert compose(json.loads(json.dumps(figures))) == digest
