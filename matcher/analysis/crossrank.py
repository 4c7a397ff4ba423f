"""Cross-rank table from log lines: per process group, what each rank says about its collectives.

Watchdog lines give the SeqNum a rank timed out in (with OpType / NumelIn), the watchdog summary gives
its last enqueued / last completed work. Compared across ranks:
- the same SeqNum with a different OpType or NumelIn: the ranks issued different collectives;
- a strict minority whose last enqueued work is below what its peers wait in never reached that
  collective; so did a rank the bundle knows (it has lines) that reports nothing while its peers time out;
- every rank waits in the same collective and all enqueued it: it stalled in transport or hardware,
  and the logs cannot blame anyone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Literal

from matcher.analysis.rankmap import RankMap, as_int
from matcher.model import Observation

TableKind = Literal["mismatch", "behind", "absent", "all-stuck", "none"]
TIMEOUT_SYMPTOM = "collective-timeout"
_DEFAULT_PG_NAMES = {None, "", "0", "default_pg"}
# Ranks of one process group cannot drift far apart: each collective waits for all of them, and at most a
# step's worth of asynchronous work (DDP buckets, FSDP shards) runs ahead. Watchdog lines without a PG
# name (torch < 2.3) whose SeqNums lie further apart than this come from different groups, and `[Rank N]`
# is then a rank inside each of them: comparing them would blame a rank for nothing.
MAX_SEQ_SPREAD_IN_ONE_GROUP = 256


@dataclass(slots=True)
class _Row:
    waiting_in: set[int] = field(default_factory=set)  # SeqNums this rank timed out in
    reported_timeout: bool = False  # a watchdog line of its own (not merely a dump request from a peer)
    last_enqueued: int | None = None
    last_completed: int | None = None
    ops: dict[int, tuple[str, int | None]] = field(default_factory=dict)  # seq -> (OpType, NumelIn)
    observations: list[Observation] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TableVerdict:
    kind: TableKind
    culprits: tuple[int, ...] = ()
    pg: str | None = None
    seqnum: int | None = None
    optype: str | None = None
    numel_in: int | None = None
    timeout_ms: int | None = None
    reporters: tuple[int, ...] = ()  # ranks that reported a timeout in the table the verdict is about
    detail: str = ""
    evidence: tuple[Observation, ...] = ()


def lone_symmetric_report(table: TableVerdict) -> bool:
    """One rank's timeout on an allreduce or barrier: it waits for any rank alike, rank 0 no more than the
    others. (A broadcast's source is usually rank 0, so one waiting rank does point there.)"""
    return len(table.reporters) == 1 and (table.optype or "").upper() != "BROADCAST"


def _pg_of(obs: Observation) -> str:
    pg = obs.fields.get("pg")
    return "0" if pg is None or str(pg) in _DEFAULT_PG_NAMES else str(pg)


def _is_watchdog_report(obs: Observation) -> bool:
    f = obs.fields
    return obs.symptom == TIMEOUT_SYMPTOM and any(k in f for k in ("seqnum", "optype", "timeout_ms"))


def build_tables(observations: list[Observation], ranks: RankMap) -> dict[str, dict[int, _Row]]:
    tables: dict[str, dict[int, _Row]] = defaultdict(dict)
    for obs in observations:
        f = obs.fields
        if not (_is_watchdog_report(obs) or any(k in f for k in ("last_enqueued", "last_completed"))):
            continue
        pg = _pg_of(obs)
        rank = ranks.rank(obs)
        if rank is None and pg == "0":
            rank = as_int(f.get("pg_rank"))  # in the default group the PG rank is the global rank
        if rank is None:
            continue
        row = tables[pg].setdefault(rank, _Row())
        row.observations.append(obs)
        row.reported_timeout |= _is_watchdog_report(obs)
        seq = as_int(f.get("seqnum"))
        if seq is not None:
            row.waiting_in.add(seq)
            op = f.get("optype")
            if op is not None:
                known_op = row.ops.get(seq)
                numel = as_int(f.get("numel_in"))
                if known_op is None or (known_op[1] is None and numel is not None):
                    row.ops[seq] = (str(op), numel)
        enq, done = as_int(f.get("last_enqueued")), as_int(f.get("last_completed"))
        if enq is not None:
            row.last_enqueued = enq if row.last_enqueued is None else max(row.last_enqueued, enq)
        if done is not None:
            row.last_completed = done if row.last_completed is None else max(row.last_completed, done)
    return tables


def _implied_ranks(rows: dict[int, _Row], ranks: RankMap) -> set[int]:
    """Ranks are dense from 0: a report from rank N proves ranks 0..N exist."""
    highest = max([*rows, *ranks.known, (ranks.world_size or 0) - 1], default=-1)
    return set(range(highest + 1)) | ranks.known


def judge(observations: list[Observation], ranks: RankMap) -> TableVerdict:
    """The most telling verdict over all process groups (mismatch > behind > absent > all-stuck)."""
    order: dict[TableKind, int] = {"mismatch": 0, "behind": 1, "absent": 2, "all-stuck": 3, "none": 4}
    verdicts = [_judge_table(pg, rows, ranks) for pg, rows in build_tables(observations, ranks).items()]
    if not verdicts:
        return TableVerdict("none")
    return min(verdicts, key=lambda v: (order[v.kind], v.pg != "0"))


def _timeout_ms(rows: dict[int, _Row]) -> int | None:
    values = [as_int(o.fields.get("timeout_ms")) for r in rows.values() for o in r.observations]
    known = [v for v in values if v is not None]
    return Counter(known).most_common(1)[0][0] if known else None


def _unnamed_groups_mixed(rows: dict[int, _Row], waited: Counter[int]) -> bool:
    named = any(o.fields.get("pg") is not None for row in rows.values() for o in row.observations)
    return not named and max(waited) - min(waited) > MAX_SEQ_SPREAD_IN_ONE_GROUP


def _judge_table(pg: str, rows: dict[int, _Row], ranks: RankMap) -> TableVerdict:
    reporters = tuple(sorted(r for r, row in rows.items() if row.reported_timeout))
    waited = Counter(seq for row in rows.values() for seq in row.waiting_in)
    timeout = _timeout_ms(rows)
    evidence = tuple(o for r in sorted(rows) for o in rows[r].observations[:1])
    if waited and _unnamed_groups_mixed(rows, waited):
        return TableVerdict(
            "none",
            pg=pg,
            timeout_ms=timeout,
            reporters=reporters,
            detail=f"SeqNums {min(waited)}..{max(waited)} without a process group name: several groups",
            evidence=evidence,
        )
    if not waited:
        op, numel = _any_op(rows)
        return TableVerdict(
            "none",
            pg=pg,
            optype=op,
            numel_in=numel,
            timeout_ms=timeout,
            reporters=reporters,
            evidence=evidence,
        )
    seq = max(waited.items(), key=lambda kv: (kv[1], -kv[0]))[0]  # the collective most ranks wait in
    op, numel = _majority_op(rows, seq)
    base = {
        "pg": pg,
        "seqnum": seq,
        "optype": op,
        "numel_in": numel,
        "timeout_ms": timeout,
        "reporters": reporters,
    }

    mismatch = _mismatch(rows)
    if mismatch is not None:
        mseq, culprits, detail = mismatch
        mop, mnumel = _majority_op(rows, mseq)
        return TableVerdict(
            "mismatch",
            culprits,
            pg=pg,
            seqnum=mseq,
            optype=mop,
            numel_in=mnumel,
            timeout_ms=timeout,
            reporters=reporters,
            detail=detail,
            evidence=evidence,
        )

    frontier = max(seq, *(row.last_enqueued or -1 for row in rows.values()))
    behind = tuple(
        sorted(r for r, row in rows.items() if row.last_enqueued is not None and row.last_enqueued < seq)
    )
    if behind and 2 * len(behind) <= len(rows):
        levels = ", ".join(f"rank {r} at #{rows[r].last_enqueued}" for r in behind)
        return TableVerdict(
            "behind",
            behind,
            detail=f"{levels} never enqueued collective #{seq} ({op or 'unknown op'}) that its peers wait in "
            f"(peers enqueued up to #{frontier})",
            evidence=tuple(o for r in behind for o in rows[r].observations[:1]) + evidence,
            **base,  # type: ignore[arg-type]
        )

    ahead = _behind_a_later_wait(rows, waited)
    if ahead is not None:
        top, late = ahead
        top_op, top_numel = _majority_op(rows, top)
        levels = ", ".join(f"rank {r} waits in #{max(rows[r].waiting_in)}" for r in late)
        return TableVerdict(
            "behind",
            late,
            pg=pg,
            seqnum=top,
            optype=top_op,
            numel_in=top_numel,
            timeout_ms=timeout,
            reporters=reporters,
            detail=f"{levels} while its peers already wait in #{top} ({top_op or 'unknown op'}): it never "
            "reached that collective",
            evidence=tuple(o for r in late for o in rows[r].observations[:1]) + evidence,
        )

    apart = _waiting_in_other_ops(rows)
    if apart is not None:
        return TableVerdict("mismatch", detail=apart, evidence=evidence, **base)  # type: ignore[arg-type]

    implied = _implied_ranks(rows, ranks)
    silent = sorted(implied - set(rows))
    if silent and len(reporters) >= 2 and len(silent) <= max(1, len(implied) // 4):
        return TableVerdict(
            "absent",
            tuple(silent),
            detail=f"rank(s) {', '.join(map(str, silent))} logged no timeout while {len(reporters)} peers "
            f"timed out in collective #{seq} ({op or 'unknown op'}): they never reached it",
            evidence=evidence,
            **base,  # type: ignore[arg-type]
        )

    if len(reporters) >= 2 and set(reporters) >= implied and set(waited) == {seq}:
        return TableVerdict(
            "all-stuck",
            detail=f"all {len(reporters)} ranks enqueued collective #{seq} ({op or 'unknown op'}) and none "
            "completed it: it stalled inside NCCL (transport or hardware), so the logs cannot name a rank",
            evidence=evidence,
            **base,  # type: ignore[arg-type]
        )
    return TableVerdict("none", evidence=evidence, **base)  # type: ignore[arg-type]


def _behind_a_later_wait(rows: dict[int, _Row], waited: Counter[int]) -> tuple[int, tuple[int, ...]] | None:
    """Ranks that time out in different collectives of one group: those stuck in an earlier one (and that
    never enqueued the later one) are behind the peers that already wait further on, when they are a
    strict minority or one of two."""
    if len(waited) < 2:
        return None
    top = max(waited)
    late = tuple(
        sorted(
            r
            for r, row in rows.items()
            if row.waiting_in
            and max(row.waiting_in) < top
            and (row.last_enqueued is None or row.last_enqueued < top)
        )
    )
    if not late or 2 * len(late) > len(rows):
        return None
    return top, late


def _waiting_in_other_ops(rows: dict[int, _Row]) -> str | None:
    """Ranks of one group that time out in collectives of different types (most in a BROADCAST, one in
    a later ALLGATHER): they issued different sequences, whichever side is ahead. Reached only when no
    side is a lagging minority (`_behind_a_later_wait`); names no culprit, since the side ahead may have
    run the extra collective or the others may have skipped one."""
    groups: dict[tuple[int, str], list[int]] = {}  # (SeqNum, OpType) a rank times out in -> ranks
    for rank, row in rows.items():
        seq = max(row.waiting_in, default=None)
        if seq is not None and seq in row.ops:
            groups.setdefault((seq, row.ops[seq][0]), []).append(rank)
    if len({op for _, op in groups}) < 2 or len({seq for seq, _ in groups}) < 2:
        return None
    described = "; ".join(
        f"rank(s) {', '.join(map(str, sorted(ranks)))} in #{seq} {op}"
        for (seq, op), ranks in sorted(groups.items())
    )
    return f"ranks time out in different collectives: {described}"


def _any_op(rows: dict[int, _Row]) -> tuple[str | None, int | None]:
    """OpType / NumelIn of watchdog lines that carry no SeqNum (torch 1.13-2.0 short forms)."""
    ops = Counter(
        (str(o.fields["optype"]), as_int(o.fields.get("numel_in")))
        for row in rows.values()
        for o in row.observations
        if "optype" in o.fields
    )
    return ops.most_common(1)[0][0] if ops else (None, None)


def _majority_op(rows: dict[int, _Row], seq: int) -> tuple[str | None, int | None]:
    ops = Counter(row.ops[seq] for row in rows.values() if seq in row.ops)
    if not ops:
        return None, None
    op, numel = ops.most_common(1)[0][0]
    return op, numel


def _mismatch(rows: dict[int, _Row]) -> tuple[int, tuple[int, ...], str] | None:
    seqs = sorted({seq for row in rows.values() for seq in row.ops})
    for seq in seqs:
        prints: dict[int, tuple[str, int | None]] = {
            r: row.ops[seq] for r, row in rows.items() if seq in row.ops
        }
        # NumelIn only counts where every side has it (1.13-2.0 lines carry none).
        if any(numel is None for _, numel in prints.values()):
            prints = {r: (op, None) for r, (op, _) in prints.items()}
        votes = Counter(prints.values()).most_common()
        if len(votes) < 2:
            continue
        (top, top_n), (_, second_n) = votes[0], votes[1]
        culprits = tuple(sorted(r for r, p in prints.items() if p != top)) if top_n > second_n else ()
        described = "; ".join(
            f"rank(s) {', '.join(str(r) for r in sorted(r for r, q in prints.items() if q == p))}: "
            f"{p[0]}" + (f" NumelIn={p[1]}" if p[1] is not None else "")
            for p, _ in votes
        )
        return seq, culprits, f"ranks disagree about collective #{seq}: {described}"
    return None
