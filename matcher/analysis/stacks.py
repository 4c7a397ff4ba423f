"""Stack dumps of hung ranks: the rank that was busy elsewhere while the others waited in a collective.

py-spy / faulthandler dumps of several ranks (one file per rank, or rank-tagged lines) are read by the
`stack-frame-*` context signatures (signatures/context-stacks.toml). A rank whose dump shows a frame inside
a collective waits for the others; a rank whose dump shows the input pipeline, a checkpoint write, an
evaluation loop or a compile, and no collective, is what they wait for. When at least one rank waits and
the busy ranks are a minority, those ranks are the culprit and their activity names the class.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from matcher.analysis.rankmap import RankMap
from matcher.model import Observation

WAITING = "stack-frame-collective-wait"
ACTIVITIES = {
    "stack-frame-input-pipeline": ("timeout/straggler-input", "reading input (DataLoader / dataset)"),
    "stack-frame-checkpoint-write": ("timeout/rank0-only-work", "writing a checkpoint"),
    "stack-frame-evaluation": ("timeout/rank0-only-work", "in an evaluation / prediction loop"),
    "stack-frame-compile": ("timeout/jit-compile", "compiling (Dynamo / Inductor / Triton / extension)"),
}


@dataclass(frozen=True, slots=True)
class StackFinding:
    class_id: str
    ranks: tuple[int, ...]
    waiting: tuple[int, ...]
    reason: str
    evidence: tuple[Observation, ...]


def finding(observations: list[Observation], rm: RankMap) -> StackFinding | None:
    """The busy minority among dumped ranks, or None when the dumps do not single anyone out."""
    waiting: set[int] = set()
    busy: dict[int, list[Observation]] = defaultdict(list)
    for obs in observations:
        rank = rm.rank(obs)
        if rank is None:
            continue
        if obs.signature == WAITING:
            waiting.add(rank)
        elif obs.signature in ACTIVITIES:
            busy[rank].append(obs)
    culprits = sorted(r for r in busy if r not in waiting)
    if not waiting or not culprits or len(culprits) > len(waiting):
        return None
    first = [busy[r][0] for r in culprits]
    kinds = {ACTIVITIES[o.signature] for o in first}
    if len(kinds) != 1:
        return None  # the busy ranks do different things: no single reading
    ((class_id, doing),) = kinds
    who = ", ".join(f"rank {r}" for r in culprits)
    where = first[0].fields.get("code_file")
    reason = (
        f"the stack dumps show {who} {doing}"
        + (f" ({where})" if where else "")
        + f" while {len(waiting)} other rank(s) waited inside a collective"
    )
    return StackFinding(class_id, tuple(culprits), tuple(sorted(waiting)), reason, tuple(first))


__all__ = ["ACTIVITIES", "StackFinding", "finding"]
