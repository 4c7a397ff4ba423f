"""The recurrence line printed under a diagnosis: "3rd time on gpu-node-017 in 7 days; first seen ...".

Scope: the same class on the same culprit node when the diagnosis names a host, otherwise the same
class in the same cluster. Counted up to and including the occurrence itself, so replaying a recorded
diagnosis prints the same line again.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.orm import Session

from bot.store.models import Occurrence
from bot.store.records import human_utc
from bot.store.settings import RECURRENCE_DAYS


def ordinal(number: int) -> str:
    teens = 10 <= number % 100 <= 20
    suffix = "th" if teens else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def recurrence_line(
    session: Session,
    *,
    class_id: str,
    node_id: int | None,
    hostname: str | None,
    cluster: str | None,
    at: datetime,
) -> str | None:
    """None on a first sighting."""
    scope: list[ColumnElement[bool]] = [Occurrence.class_id == class_id, Occurrence.occurred_at <= at]
    if node_id is not None:
        scope.append(Occurrence.node_id == node_id)
        where = f"on {hostname}"
    else:
        if cluster is not None:
            scope.append(Occurrence.cluster == cluster)
        where = f"for {class_id}"
    window_start = at - timedelta(days=RECURRENCE_DAYS)
    recent = func.count().filter(Occurrence.occurred_at > window_start)
    row = session.execute(
        select(func.count(), recent, func.min(Occurrence.occurred_at)).where(and_(*scope))
    ).one()
    total, in_window, first_seen = int(row[0]), int(row[1]), row[2]
    if total < 2:
        return None
    since = f"first seen {human_utc(first_seen)}"
    if in_window >= 2:
        return f"{ordinal(in_window)} time {where} in {RECURRENCE_DAYS} days; {since}"
    return f"{ordinal(total)} time {where}, none other in {RECURRENCE_DAYS} days; {since}"
