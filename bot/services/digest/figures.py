"""The digest's figures, read from the store: `ncclbot report`'s (`bot.services.report.collect`, the
same keys and numbers) plus what only the digest shows. A JSON-able document: `ncclbot digest --preview
--json` prints it, and `compose` builds the digest from it alone."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from bot.services.report import collect
from bot.services.residue import list_templates
from bot.store.records import iso_utc

DAYS = 7
CHART_WEEKS = 8
TOP_FINGERPRINTS = 5
STALE_LIMIT = 10
RESIDUE_LIMIT = 5
# A lemon node's Drain button acts on its latest incident; a node that is a lemon for its failed probes
# alone may have had that incident weeks ago.
DRAIN_LOOKBACK_DAYS = 90


def gather(store: Any, *, week: str, channel: str | None, as_of: datetime, stale_days: int) -> dict[str, Any]:
    """Everything the digest of `week` shows, over the 7 days up to `as_of` against the 7 before."""
    figures: dict[str, Any] = {"week": week, "channel": channel}
    figures.update(collect(store, days=DAYS, now=as_of))
    figures["top_fingerprints"] = [
        asdict(row) for row in store.top_fingerprints(days=DAYS, now=as_of, limit=TOP_FINGERPRINTS)
    ]
    figures["open_incidents"] = {
        "older_than_days": stale_days,
        "incidents": [
            i.to_json()
            for i in store.stale_open_incidents(older_than_days=stale_days, now=as_of, limit=STALE_LIMIT)
        ],
    }
    figures["corrections"] = [
        {**asdict(row), "at": iso_utc(row.at)} for row in store.corrections(days=DAYS, now=as_of)
    ]
    lookback = as_of - timedelta(days=DRAIN_LOOKBACK_DAYS)
    figures["latest_incident_per_node"] = [
        asdict(row) for row in store.latest_incident_per_node(start=lookback, end=as_of)
    ]
    figures["residue"] = [
        t.to_json() for t in list_templates(store, days=DAYS, now=as_of, limit=RESIDUE_LIMIT)
    ]
    figures["weekly_by_class"] = _weekly(store, as_of)
    chart_start = as_of - timedelta(days=DAYS * CHART_WEEKS)
    figures["node_class"] = [
        {"node": r.hostname, "cluster": r.cluster, "class": r.class_id, "count": r.count}
        for r in store.node_class_counts(start=chart_start, end=as_of)
    ]
    return figures


def _weekly(store: Any, as_of: datetime) -> dict[str, Any]:
    """Occurrences per class in each of the last 8 periods of 7 days, oldest first; each period is
    labelled by the ISO week its last day falls in."""
    ends = [as_of - timedelta(days=DAYS * back) for back in reversed(range(CHART_WEEKS))]
    counts = [store.class_counts(start=end - timedelta(days=DAYS), end=end) for end in ends]
    classes = sorted({class_id for period in counts for class_id in period})
    return {
        "weeks": [_week_label(end) for end in ends],
        "counts": {class_id: [period.get(class_id, 0) for period in counts] for class_id in classes},
    }


def _week_label(end: datetime) -> str:
    year, week, _ = (end - timedelta(seconds=1)).isocalendar()
    return f"{year}-W{week:02d}"
