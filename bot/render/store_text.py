"""Terminal lines for `ncclbot history` and `ncclbot incidents`.

Host names, job ids and probe reasons come from logs and remote machines: every field goes through
`field` (control characters stripped, one line, cut to its column), so a stored escape sequence cannot
drive the terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bot.render.messages import field
from bot.store.records import human_utc

_HOST_COLUMN = 20


def history_lines(
    occurrences: Sequence[Any], runs: Sequence[Any], *, node: str | None, class_id: str | None, days: int
) -> Iterable[str]:
    for o in occurrences:
        cost = "" if o.gpu_hours_lost is None else f"  ~{o.gpu_hours_lost:.1f} GPU-h"
        job = f"job {field(o.job_id, 80)}" if o.job_id else "no job"
        where = field(o.host, 64) if o.host else "-"
        yield (
            f"{human_utc(o.occurred_at)}  #{o.incident_id:<5} {field(o.class_id, 64):<30} "
            f"{where:<{_HOST_COLUMN}} {job}{cost}"
        )
    scope = (f" on {field(node, 64)}" if node else "") + (f" of {class_id}" if class_id else "")
    yield f"{len(occurrences)} occurrence(s){scope} in the last {days} days"
    if runs:
        yield "probe runs:"
        for run in runs:
            when = human_utc(run.started_at or run.recorded_at)
            reasons = "; ".join(str(r) for r in run.result.get("reasons", []))
            host, verdict = field(run.host, 64), field(run.verdict, 16)
            yield f"{when}  {host:<{_HOST_COLUMN}} {verdict:<9} {field(reasons)}"


def incident_lines(incidents: Sequence[Any], open_only: bool) -> Iterable[str]:
    for i in incidents:
        hosts = field(",".join(i.culprit_hosts), 64) or "-"
        yield (
            f"#{i.id:<5} {field(i.status, 16):<8} {field(i.class_id, 64):<30} {hosts:<{_HOST_COLUMN}} "
            f"x{i.occurrences:<4} first {human_utc(i.first_seen)}  last {human_utc(i.last_seen)}"
        )
    yield f"{len(incidents)} {'open ' if open_only else ''}incident(s)"
