"""Splitting the timeout family when no line names a root cause.

Healthy ranks only say "Watchdog caught collective operation timeout"; what the lagging rank was doing
decides the class. Clues are context observations that carry a class (checkpoint saving / evaluation /
tokenization -> rank0-only-work, torch.compile / Triton / ninja builds -> jit-compile, dataloader workers /
slow steps -> straggler-input); the cross-rank table and Flight Recorder add who lagged or disagreed.
Every rule adds evidence mass; the family's other members stay as low-mass runners-up so a bare timeout
still lists the plausible causes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from matcher.analysis.crossrank import TableVerdict, lone_symmetric_report
from matcher.analysis.rankmap import RankMap
from matcher.analysis.scoring import chronological_key
from matcher.model import FRFinding, Observation
from matcher.taxonomy import UNKNOWN

STRAGGLER = "timeout/straggler-input"
RANK0 = "timeout/rank0-only-work"
ASYMMETRIC = "timeout/asymmetric-collectives"
JIT = "timeout/jit-compile"

LONG_TIMEOUT_MS = 600_000  # 10 min and more: a user-set or default (30 min) process-group timeout
EARLY_SEQNUM = 10  # the first collectives of a run: init barriers, the first steps a JIT build delays
SMALL_BROADCAST_NUMEL = 1024
# Cascade symptom of a report that names the rank(s) that never arrived (monitored barrier, desync debug).
MISSING_RANK = "missing-rank"
COLLECTIVE_TIMEOUT = "collective-timeout"
# A worker killed by SIGKILL: the kill is the event. What the job was doing (loading shards, tokenizing,
# compiling) says little about why it died (usually the host or cgroup OOM killer), and ranks that timed
# out waiting for it (other nodes, which its launcher did not tear down) are its victims, not stragglers.
KILLED = "sigkill"
ABORTED = "sigabrt"
KILLED_CLUE_FACTOR = 0.4
HOST_OOM = "system/host-oom"
KILLED_MASS = 0.5
# A progress bar that had run about as long as the timeout that fired: the solo work the others waited for.
# A bar far longer than the timeout is the job's own training loop, which ran fine before the hang.
BAR_SHARE_OF_TIMEOUT = (0.9, 1.25)
BAR_MASS = 0.9


@dataclass(slots=True)
class Inference:
    masses: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    evidence: dict[str, list[Observation]] = field(default_factory=lambda: defaultdict(list))

    def add(self, cls: str, amount: float, observations: list[Observation] | None = None) -> None:
        self.masses[cls] += amount
        if observations:
            self.evidence[cls].extend(observations)


def _barrier_like(table: TableVerdict) -> bool:
    op = (table.optype or "").upper()
    if op == "BARRIER":
        return True
    # A flag or object-size broadcast is a sync point; a large one mid-run is a model's own traffic (DDP
    # buffer sync), which any lagging rank stalls.
    if op == "BROADCAST" and (table.numel_in is None or table.numel_in <= SMALL_BROADCAST_NUMEL):
        return True
    if op == "ALLREDUCE" and table.numel_in is not None and table.numel_in <= 1:
        return True
    return table.seqnum is not None and table.seqnum <= EARLY_SEQNUM


def _bar_seconds(text: str) -> int | None:
    parts = text.split(":")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds


def _long_bar(observations: list[Observation], timeout_ms: int | None, ranks: RankMap) -> Observation | None:
    """The longest progress bar on rank 0 (or on no named rank), when it ran about as long as the timeout."""
    if timeout_ms is None:
        return None
    best: tuple[int, Observation] | None = None
    for obs in observations:
        seconds = _bar_seconds(str(obs.fields.get("bar_elapsed", "")))
        if seconds is None or ranks.rank(obs) not in (0, None):
            continue
        if best is None or seconds > best[0]:
            best = (seconds, obs)
    low, high = BAR_SHARE_OF_TIMEOUT
    if best is None or not low * timeout_ms <= best[0] * 1000 <= high * timeout_ms:
        return None
    return best[1]


def _first_kills(cascades: list[Observation]) -> list[Observation]:
    """SIGKILL reports, unless a SIGABRT came first: then the watchdog had already aborted a rank and the
    kills are the launcher's teardown of the rest."""
    kills = [o for o in cascades if o.symptom == KILLED]
    aborts = [o for o in cascades if o.symptom == ABORTED]
    if (
        kills
        and aborts
        and chronological_key(min(aborts, key=chronological_key))
        < chronological_key(min(kills, key=chronological_key))
    ):
        return []
    return kills


def infer(
    observations: list[Observation],
    cascades: list[Observation],
    table: TableVerdict,
    fr: FRFinding | None,
    ranks: RankMap,
) -> Inference:
    inf = Inference()
    clues: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        if obs.role == "context":
            for cls in obs.classes:
                clues[cls].append(obs)

    lagging = (
        table.kind in ("behind", "absent")
        or (fr is not None and fr.kind in ("missing-ranks", "behind"))
        or any(o.symptom == MISSING_RANK for o in cascades)
    )
    long_timeout = table.timeout_ms is not None and table.timeout_ms >= LONG_TIMEOUT_MS
    early = table.seqnum is not None and table.seqnum <= EARLY_SEQNUM
    timed_out = table.seqnum is not None or any(o.symptom == COLLECTIVE_TIMEOUT for o in cascades)
    kills = _first_kills(cascades)
    clue_factor = KILLED_CLUE_FACTOR if kills else 1.0

    # Classes the error lines themselves suggest (a bare ncclSystemError: sockets or /dev/shm).
    suggested = {cls for o in cascades for cls in o.classes}
    for cls, obs_list in clues.items():
        weight = clue_factor * max(o.weight for o in obs_list)
        if cls == RANK0:
            on_rank0 = [o for o in obs_list if ranks.rank(o) in (0, None)]
            if not on_rank0:
                inf.add(cls, 0.3 * weight, obs_list)
                continue
            amount = 0.8 * weight + (0.3 if long_timeout else 0.0) + (0.2 if _barrier_like(table) else 0.0)
            if table.culprits == (0,) or (table.reporters and 0 not in table.reporters):
                amount += 0.2
            inf.add(cls, amount, on_rank0)
        elif cls == JIT:
            inf.add(cls, 0.8 * weight + (0.4 if early else 0.0), obs_list)
        elif cls == STRAGGLER:
            inf.add(cls, 0.8 * weight + (0.3 if lagging else 0.0), obs_list)
        else:
            # A clue for a non-timeout class (e.g. "Using docker0") is weak without an error line, and weaker
            # still beside an error line that names other suspects.
            other_suspects = bool(suggested) and cls not in suggested
            share = 0.5 if cls == ASYMMETRIC else (0.2 if other_suspects else 0.3)
            inf.add(cls, share * weight, obs_list)

    # The main process missing from a long sync point (30-min barrier / broadcast / 1-element allreduce)
    # is the signature of rank-0 solo work even when its progress bar left no line behind.
    sync_point = (
        long_timeout
        and _barrier_like(table)
        and 0 not in table.reporters
        and not lone_symmetric_report(table)
    )
    rank0_awaited = table.culprits == (0,) or (fr is not None and fr.culprit_ranks == (0,))
    if RANK0 not in clues and not kills and sync_point and rank0_awaited and (table.seqnum is None or early):
        inf.add(RANK0, 1.0, list(table.evidence))
    # Work that ran as long as the others waited, when nothing else says what the lagging side was doing.
    long_bar = None if clues or kills else _long_bar(observations, table.timeout_ms, ranks)
    if long_bar is not None:
        inf.add(RANK0, BAR_MASS, [long_bar])

    if table.kind == "mismatch":
        inf.add(ASYMMETRIC, 1.5, list(table.evidence))
    if fr is not None and fr.kind == "mismatch":
        inf.add(ASYMMETRIC, 1.5)
    if lagging:
        # A lagging rank is the straggler class's own evidence unless a clue already says why it lagged.
        explained = bool(kills) or any(inf.masses.get(cls, 0.0) >= 0.8 for cls in (RANK0, JIT))
        # Missing from a scalar sync mid-run (a "done?" flag, a metric): the rank more likely skipped it
        # (ran out of data, exited its loop early) than arrived late.
        scalar_sync = table.numel_in is not None and table.numel_in <= 1 and not early
        if explained:
            inf.add(STRAGGLER, 0.2, list(table.evidence))
            inf.add(ASYMMETRIC, 0.2)
        elif scalar_sync:
            inf.add(ASYMMETRIC, 0.6, list(table.evidence))
            inf.add(STRAGGLER, 0.35)
        else:
            inf.add(STRAGGLER, 0.6, list(table.evidence))
            inf.add(ASYMMETRIC, 0.35)

    if kills and timed_out:
        # The timeouts are what the killed rank's peers reported; the kill explains them.
        inf.add(HOST_OOM, KILLED_MASS, kills)
    if timed_out and not inf.masses:
        # A bare timeout: nothing says why. Unknown leads; the runners-up follow how often each turns out
        # to be the cause in resolved threads: ranks that issued different collectives (uneven data, a
        # rank-dependent branch) most often, then rank 0's solo work (evaluation, checkpoints) when a long
        # timeout ran out while rank 0 was not among the waiting ranks, then a slow rank.
        rank0_away = long_timeout and bool(table.reporters) and 0 not in table.reporters
        inf.add(UNKNOWN, 0.5)
        inf.add(ASYMMETRIC, 0.3)
        inf.add(RANK0, 0.6 if sync_point else (0.25 if rank0_away else 0.12))
        inf.add(STRAGGLER, 0.2, list(table.evidence))
        if early:
            inf.add(JIT, 0.1)
    elif timed_out:
        for cls, amount in ((STRAGGLER, 0.1), (ASYMMETRIC, 0.1), (RANK0, 0.05)):
            if cls not in inf.masses:
                inf.add(cls, amount)
    return inf
