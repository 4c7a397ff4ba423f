"""Find the bad node(s) among suspects by bisection: halve the set, probe each half together, recurse
into the halves that fail. A single bad node among N is found in ceil(log2 N) rounds (a round probes
both halves of one split; the two probes of a round may run at the same time). Stdlib only, pure: the
probe is a function, so the search is tested without any cluster.

When both halves pass although their union failed, the fault needs nodes from both sides (a link or a
switch between them, a mismatched setting): that group is reported as `unresolved` instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

ProbeFn = Callable[[list[str]], bool]  # True when the nodes pass together


@dataclass(slots=True)
class BisectStep:
    round: int
    nodes: list[str]
    healthy: bool


@dataclass(slots=True)
class BisectResult:
    bad: list[str] = field(default_factory=list)
    unresolved: list[list[str]] = field(default_factory=list)
    steps: list[BisectStep] = field(default_factory=list)
    rounds: int = 0
    whole_set_healthy: bool | None = None


def bisect(
    nodes: Sequence[str],
    probe: ProbeFn,
    *,
    confirm: bool = True,
    on_progress: Callable[[str], None] | None = None,
) -> BisectResult:
    """Bisect `nodes`; with `confirm`, first probe the whole set and stop when it passes."""
    result = BisectResult()
    group = list(nodes)
    if not group:
        return result

    def run(round_no: int, members: list[str]) -> bool:
        healthy = probe(list(members))
        result.steps.append(BisectStep(round_no, list(members), healthy))
        result.rounds = max(result.rounds, round_no)
        if on_progress is not None:
            state = "pass" if healthy else "FAIL"
            on_progress(f"bisect round {round_no}: {', '.join(members)} -> {state}")
        return healthy

    if confirm:
        result.whole_set_healthy = run(0, group)
        if result.whole_set_healthy:
            return result

    def search(members: list[str], depth: int) -> None:
        if len(members) == 1:
            result.bad.append(members[0])
            return
        middle = len(members) // 2
        left, right = members[:middle], members[middle:]
        left_ok, right_ok = run(depth, left), run(depth, right)
        if left_ok and right_ok:
            result.unresolved.append(members)
        if not left_ok:
            search(left, depth + 1)
        if not right_ok:
            search(right, depth + 1)

    search(group, 1)
    return result
