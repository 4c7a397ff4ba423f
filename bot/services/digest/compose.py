"""The digest from its figures: a pure function (no store, no clock), so that what it shows follows
from the document `gather` produced and nothing else."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.model.digest import (
    ClassLine,
    CorrectionLine,
    CostLine,
    Digest,
    FingerprintLine,
    FixLine,
    Grid,
    LemonLine,
    ResidueLine,
    ResolveLine,
    StaleIncident,
)
from matcher.taxonomy import title

HEATMAP_NODES = 15
LEMON_LIMIT = 5
FIX_LIMIT = 8  # the fixes named most often


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def compose(figures: dict[str, Any]) -> Digest:
    as_of = _instant(figures["as_of"])
    cost = {row["key"]: row["gpu_hours"] for row in figures["gpu_hours_lost_by_class"]}
    latest = {
        (row["hostname"], row["cluster"]): row["incident_id"] for row in figures["latest_incident_per_node"]
    }
    classes = tuple(
        ClassLine(
            class_id=row["key"],
            title=title(row["key"]),
            count=row["count"],
            previous=row["previous"],
            trend=row["trend"],
            gpu_hours=cost.get(row["key"], 0.0),
        )
        for row in figures["recurrence_by_class"]
    )
    return Digest(
        week=figures["week"],
        channel=figures["channel"],
        as_of=as_of,
        days=figures["days"],
        classes=classes,
        fingerprints=tuple(
            FingerprintLine(
                fingerprint=row["fingerprint"],
                class_id=row["class_id"],
                count=row["count"],
                previous=row["previous"],
                incidents=row["incidents"],
                incident_id=row["incident_id"],
                hosts=tuple(row["culprit_hosts"]),
            )
            for row in figures["top_fingerprints"]
        ),
        lemons=tuple(
            LemonLine(
                hostname=row["hostname"],
                cluster=row["cluster"],
                score=row["score"],
                incidents=row["incidents"],
                failed_probes=row["failed_probes"],
                probe_runs=row["probe_runs"],
                incident_id=latest.get((row["hostname"], row["cluster"])),
            )
            for row in figures["lemon_nodes"]
            if row["is_lemon"]
        )[:LEMON_LIMIT],
        costs=tuple(
            CostLine(row["key"], row["gpu_hours"], row["occurrences"], row["estimated"])
            for row in figures["gpu_hours_lost_by_class"]
            if row["occurrences"]
        ),
        resolve=tuple(
            ResolveLine(row["key"], row["resolved"], row["median_hours"]) for row in figures["mttr"]
        ),
        stale_days=figures["open_incidents"]["older_than_days"],
        stale=tuple(_stale(row, as_of) for row in figures["open_incidents"]["incidents"]),
        fixes=tuple(
            FixLine(row["fix"], row["held"], row["recurred"], row["pending"])
            for row in figures["fix_effectiveness"]
        )[:FIX_LIMIT],
        corrections=tuple(
            CorrectionLine(row["incident_id"], row["given"], row["corrected"], row["user"], row["note"])
            for row in figures["corrections"]
        ),
        residue=tuple(
            ResidueLine(
                template_id=row["id"],
                template=row["template"],
                occurrences=row["occurrences"],
                lines=row["lines"],
                classes=tuple(row["classes"]),
                example=row["examples"][0] if row["examples"] else "",
            )
            for row in figures["residue"]
        ),
        weekly=_weekly(figures["weekly_by_class"]),
        heatmap=_heatmap(figures["node_class"]),
    )


def _stale(row: dict[str, Any], as_of: datetime) -> StaleIncident:
    first_seen = _instant(row["first_seen"])
    return StaleIncident(
        id=row["id"],
        class_id=row["class"],
        hosts=tuple(row["culprit_hosts"]),
        first_seen=first_seen,
        occurrences=row["occurrences"],
        age_days=(as_of - first_seen).days,
    )


def _weekly(document: dict[str, Any]) -> Grid:
    counts: dict[str, list[int]] = document["counts"]
    rows = sorted(counts, key=lambda class_id: (-sum(counts[class_id]), class_id))
    return Grid(
        rows=tuple(rows),
        columns=tuple(document["weeks"]),
        cells=tuple(tuple(counts[class_id]) for class_id in rows),
    )


def _heatmap(rows: list[dict[str, Any]]) -> Grid:
    """Nodes with the most occurrences first (at most HEATMAP_NODES), classes by total."""
    by_node: dict[str, dict[str, int]] = {}
    for row in rows:
        node = row["node"] if not row["cluster"] else f"{row['node']} ({row['cluster']})"
        cells = by_node.setdefault(node, {})
        cells[row["class"]] = cells.get(row["class"], 0) + row["count"]
    nodes = sorted(by_node, key=lambda n: (-sum(by_node[n].values()), n))[:HEATMAP_NODES]
    totals: dict[str, int] = {}
    for node in nodes:
        for class_id, count in by_node[node].items():
            totals[class_id] = totals.get(class_id, 0) + count
    classes = sorted(totals, key=lambda c: (-totals[c], c))
    return Grid(
        rows=tuple(nodes),
        columns=tuple(classes),
        cells=tuple(tuple(by_node[node].get(c, 0) for c in classes) for node in nodes),
    )
