"""How long before the failure the job last made progress (`Diagnosis.facts["since_progress_ms"]`).

Milliseconds from the last timestamped progress line (a context line with a `step` field: a training
step / iteration log) to the start of the failure: the first timestamped failure line (root or cascade) at
or after it, less the wait that line reports when it is a timeout ("ran for N milliseconds"), so that the
store, which adds the timeout that fired for GPU-hours lost, does not count the wait twice.
Unknown (None) unless both times are known and the last progress line is surely the last one: the scanner
keeps only the first few lines per signature and process, so a process whose progress lines reached that
cap may have logged later ones.
"""

from __future__ import annotations

from collections import Counter

from matcher.model import Observation
from matcher.scanning.scan import MAX_PER_WRITER

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
        o for o in observations if o.role != "context" and o.line.time is not None and o.line.time >= moved_at
    ]
    if not failures:
        return None
    first = min(failures, key=lambda o: o.line.time or 0.0)
    waited_ms = first.fields.get("elapsed_ms", first.fields.get("timeout_ms", 0))
    # A field that did not parse as a number stays text: it says nothing about the wait.
    waited = float(waited_ms) if isinstance(waited_ms, int | float) else 0.0
    gap_ms = ((first.line.time or moved_at) - moved_at) * 1000 - waited
    return max(0, round(gap_ms))
