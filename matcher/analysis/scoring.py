"""Evidence mass per class, calibrated confidences and the evidence excerpts that back each class.

Mass: observations de-duplicated by (signature, rank or host), sorted by weight, summed with harmonic decay
(the k-th repeat adds w/k: a thousand identical lines are not a thousand times the proof), plus a bonus
for independent signatures. Root lines count fully; cascade classes (a peer-exit line names a class
but is what a victim says) count at a discount and only where no root line exists at all.

Confidence of class c = strength(mass_c) * mass_c / total mass: strength says how much evidence there is
(one weight-1 line ~0.8, several independent lines ~0.95), the share says how much of it points at c.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from matcher.analysis.rankmap import RankMap
from matcher.analysis.redact import redact
from matcher.model import Evidence, Observation
from matcher.rules import rules

EVIDENCE_PER_CLASS = 5
# A clue (context) says more about the cause than what the waiting ranks report (cascade).
_ROLE_ORDER = {"root": 0, "context": 1, "cascade": 2}
_EXCERPT_CHARS = 400


def mass(observations: Iterable[Observation], ranks: RankMap) -> float:
    best: dict[tuple[str, int | None, str | None], float] = {}
    for obs in observations:
        rank = ranks.rank(obs)
        # Lines without a rank (NCCL, kernel) still count once per host: two hosts are two witnesses.
        key = (obs.signature, rank, None if rank is not None else ranks.host(obs))
        best[key] = max(best.get(key, 0.0), obs.weight)
    weights = sorted(best.values(), reverse=True)
    signatures = {key[0] for key in best}
    total = sum(w / (i + 1) for i, w in enumerate(weights))
    return total + 0.25 * min(len(signatures) - 1, 3) if weights else 0.0


def strength(m: float) -> float:
    return 1.0 - 0.5 * math.exp(-m)


def confidences(masses: dict[str, float]) -> dict[str, float]:
    total = sum(masses.values())
    if total <= 0:
        return {}
    cap = rules().confidence.max_confidence
    return {c: min(cap, strength(m) * m / total) for c, m in masses.items() if m > 0}


def by_class(observations: Iterable[Observation], role: str) -> dict[str, list[Observation]]:
    grouped: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        if obs.role == role:
            for cls in obs.classes:
                grouped[cls].append(obs)
    return grouped


def chronological_key(obs: Observation) -> tuple[int, float, str, int]:
    """Root, then context clues, then cascade; then earliest in time (untimed last); then file order."""
    when = obs.line.time if obs.line.time is not None else math.inf
    return (_ROLE_ORDER.get(obs.role, 3), when, obs.line.source, obs.line.lineno)


def excerpts(
    observations: Iterable[Observation], limit: int = EVIDENCE_PER_CLASS, pinned: Iterable[Observation] = ()
) -> tuple[Evidence, ...]:
    """Best evidence first: `pinned` lines (e.g. the lagging rank's own report) in their order, then the
    rest by `chronological_key`; one excerpt per distinct (signature, text)."""
    chosen: list[Evidence] = []
    seen: set[tuple[str, str]] = set()
    for obs in [*pinned, *sorted(observations, key=chronological_key)]:
        key = (obs.signature, obs.line.text)
        if key in seen:
            continue
        seen.add(key)
        # Redact before cutting: a token cut in half by the limit would no longer look like one.
        text = redact(obs.line.raw or obs.line.text)[:_EXCERPT_CHARS]
        chosen.append(
            Evidence(source=obs.line.source, line=obs.line.lineno, text=text, signature=obs.signature)
        )
        if len(chosen) == limit:
            break
    return tuple(chosen)
