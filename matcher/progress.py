"""How long before the failure the job last made progress (`Diagnosis.facts["since_progress_ms"]`).

Milliseconds from the last timestamped progress line (a context line with a `step` field: a training
step / iteration log) to the first timestamped failure line (root or cascade) at or after it; the store
adds it to the timeout that fired for GPU-hours lost. Unknown (None) unless both times are known and the
last progress line is surely the last one: the scanner keeps only the first few lines per signature and
process, so a process whose progress lines reached that cap may have logged later ones.
"""

from __future__ import annotations

from collections import Counter

from matcher.model import Observation
from matcher.scan import MAX_PER_WRITER

FACT = "since_progress_ms"


def _writer(obs: Observation) -> tuple[str, int | None, str | None, int | None]:
    return (obs.signature, obs.line.rank, obs.line.host, obs.line.pid)


def since_progress_ms(observations: list[Observation]) -> int | None:
    progress = [o for o in observations if o.role == "context" and "step" in o.fields]
    timed = [(o.line.time, o) for o in progress if o.line.time is not None]
    if not timed:
        return None
    moved_at, last = max(timed, key=lambda pair: pair[0])
    kept = Counter(_writer(o) for o in progress)
    if kept[_writer(last)] >= MAX_PER_WRITER:
        return None
    # A warning the run survived (progress went on after it) is not the failure.
    failures = [
        o.line.time
        for o in observations
        if o.role != "context" and o.line.time is not None and o.line.time >= moved_at
    ]
    return round((min(failures) - moved_at) * 1000) if failures else None
