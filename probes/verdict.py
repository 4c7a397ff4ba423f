"""From what the ranks reported to healthy / degraded / failed with reasons. Stdlib only, pure."""

from __future__ import annotations

import statistics

from probes.progress import human_bytes
from probes.result import ProbeResult

# A ring hop slower than this fraction of the median hop marks a slow GPU or link.
SLOW_LINK_FRACTION = 0.5


def _ranges(sizes: list[int]) -> str:
    if len(sizes) == 1:
        return human_bytes(sizes[0])
    return f"{human_bytes(sizes[0])}..{human_bytes(sizes[-1])} ({len(sizes)} sizes)"


def failure_reasons(result: ProbeResult, *, deadline_s: float | None = None) -> list[str]:
    by_deadline = f" before the {deadline_s:g} s deadline" if deadline_s else ""
    # Ranks that never arrived come first: the errors and stalls of the others usually follow from them.
    missing, errors, behind, stalled = [], [], [], []
    unfinished = [
        r for r in result.ranks if r.arrived and not r.finished and not r.error and r.step is not None
    ]
    furthest = max(unfinished, key=lambda r: r.step or 0, default=None)
    for rank in result.ranks:
        where = f"rank {rank.rank}" + (f" ({rank.host})" if rank.host else "")
        if not rank.arrived:
            missing.append(f"rank {rank.rank} never arrived{by_deadline}")
        elif rank.error:
            errors.append(f"{where} failed: {rank.error}")
        elif not rank.finished and furthest is not None and (rank.step or 0) < (furthest.step or 0):
            # The others moved on and now wait for it inside a collective: this one is the straggler.
            behind.append(
                f"{where} is the straggler: stuck at '{rank.phase}' while other ranks reached"
                f" '{furthest.phase}'{by_deadline}"
            )
        elif not rank.finished:
            stalled.append(f"{where} did not finish{by_deadline} (last seen: {rank.phase or 'unknown'})")
    reasons = missing + behind + errors + stalled
    wrong: dict[int, list[int]] = {}
    for size in result.results:
        for rank_id in size.wrong_ranks:
            wrong.setdefault(rank_id, []).append(size.bytes)
    for rank_id, sizes in sorted(wrong.items()):
        reasons.append(f"wrong result on rank {rank_id} at {_ranges(sizes)}")
    for link in result.links:
        if not link.correct:
            reasons.append(f"wrong data on ring hop rank {link.src} -> rank {link.dst}")
    return reasons


def degradation_reasons(result: ProbeResult) -> list[str]:
    reasons: list[str] = []
    # Only NCCL hop timings are judged: Gloo on CPU measures the host's scheduler as much as any link.
    if result.backend == "nccl" and len(result.links) >= 3:
        median = statistics.median(link.gbps for link in result.links)
        for link in result.links:
            if median > 0 and link.gbps < SLOW_LINK_FRACTION * median:
                reasons.append(
                    f"slow ring hop rank {link.src} -> rank {link.dst}: {link.gbps:.2f} GB/s"
                    f" vs median {median:.2f} GB/s"
                )
    for check in result.checks:
        if check.status == "fail":
            host = f" on {check.host}" if check.host else ""
            reasons.append(f"node check {check.name} failed{host}: {check.evidence}")
    return reasons


def decide(
    result: ProbeResult, *, deadline_s: float | None = None, extra_degraded: list[str] | None = None
) -> None:
    """Set `result.verdict` and `result.reasons` in place."""
    failed = failure_reasons(result, deadline_s=deadline_s)
    degraded = degradation_reasons(result) + list(extra_degraded or [])
    if failed:
        result.verdict = "failed"
        result.reasons = failed + degraded
    elif degraded:
        result.verdict = "degraded"
        result.reasons = degraded
    else:
        result.verdict = "healthy"
        result.reasons = []
