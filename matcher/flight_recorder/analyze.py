"""Flight Recorder verdict: which ranks never arrived at, fell behind in, or disagree about a collective.

`load_dump` (from `matcher.flight_recorder.load`) reads one rank's dump safely; `analyze_dumps` compares
all dumps of a job. Per process group (pg_config name + member set, since split groups may reuse names) it
builds each member's progress: last enqueued and last completed collective (ring-buffer entries, plus
`pg_status` where that counter is not mixed with point-to-point work). Then, in the order of the official
analyzer's questions:

1. a member that dumped but has no trace of the group while its peers wait in it never arrived
   (typically a rank whose Python thread is stuck: it holds the GIL, loops, or waits on input);
2. the same sequence number with a different op, shape or dtype is a mismatch; the minority is blamed
   (the official tool trusts the first rank; we vote, so an odd first rank is not mistaken for the norm);
3. a strict minority whose last enqueued, or last completed, collective is lower than everyone else's
   fell behind (stopped issuing work, or its GPU stopped completing it);
4. every member enqueued and none completed: the collective itself stalled, nobody can be blamed.

Point-to-point entries are not compared: their collective counter does not advance and their own
counter legitimately differs between pipeline stages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from matcher.flight_recorder.load import DumpFormatError, FRDump, FREntry, UnsafeDumpError, load_dump
from matcher.model import Evidence, FRFinding

__all__ = ["DumpFormatError", "FRDump", "UnsafeDumpError", "analyze_dumps", "load_dump"]

FR_SIGNATURE = "flight-recorder"
# Ops whose per-rank sizes legitimately differ (uneven all-to-all splits).
_UNEVEN_OPS = ("all_to_all", "alltoall")


@dataclass(slots=True)
class _Progress:
    rank: int
    enqueued: int
    completed: int | None
    by_seq: dict[int, FREntry] = field(default_factory=dict)

    def pending(self) -> list[FREntry]:
        done = self.completed if self.completed is not None else -1
        return [e for seq, e in sorted(self.by_seq.items()) if seq > done and e.state != "completed"]


@dataclass(frozen=True, slots=True)
class _GroupVerdict:
    kind: str  # missing-ranks | mismatch | behind | all-stuck
    pg: str
    culprits: tuple[int, ...]
    seqnum: int | None
    optype: str | None
    detail: str
    source: str
    started_ns: int  # creation time of the collective the verdict is about (ordering across groups)


def analyze_dumps(dumps: Sequence[FRDump]) -> FRFinding:
    by_rank: dict[int, FRDump] = {}
    for dump in dumps:
        if dump.rank is not None:
            by_rank.setdefault(dump.rank, dump)
    ranks_dumped = tuple(sorted(by_rank))
    if not by_rank:
        return FRFinding((), (), "no Flight Recorder dump could be tied to a rank", "no-issue")

    # Entries by group, once per dump: each group's verdict then reads only its own entries, so the work
    # is linear in entries plus group members, however many groups a (hostile) pg_config names.
    index = _Index(
        by_pg={rank: _entries_by_pg(dump) for rank, dump in by_rank.items()},
        oldest_ns={rank: _oldest_entry_ns(dump) for rank, dump in by_rank.items()},
    )
    verdicts = [v for v in (_judge(pg, members, by_rank, index) for pg, members in _groups(by_rank)) if v]
    blaming = [v for v in verdicts if v.culprits]
    if blaming:
        return _blame(ranks_dumped, blaming)
    mismatches = [v for v in verdicts if v.kind == "mismatch"]
    if mismatches:
        first = min(mismatches, key=lambda v: v.started_ns)
        return _finding(ranks_dumped, (), first, f"{first.detail}; the ranks split evenly, so none is blamed")
    stuck = [v for v in verdicts if v.kind == "all-stuck"]
    if stuck:
        first = min(stuck, key=lambda v: v.started_ns)
        reason = (
            f"every rank of process group {first.pg} enqueued collective #{first.seqnum} ({first.optype}) "
            "and none completed it: the collective itself stalled (transport or hardware), "
            "so no rank can be blamed from the dumps"
        )
        return _finding(ranks_dumped, (), first, reason)
    return FRFinding(
        ranks_dumped, (), "the dumps show no rank behind or disagreeing and no stalled collective", "no-issue"
    )


def _finding(
    ranks_dumped: tuple[int, ...], culprits: tuple[int, ...], v: _GroupVerdict, reason: str
) -> FRFinding:
    evidence = Evidence(source=v.source, line=0, text=v.detail, signature=FR_SIGNATURE)
    return FRFinding(
        ranks_dumped=ranks_dumped,
        culprit_ranks=culprits,
        reason=reason,
        kind=v.kind,  # type: ignore[arg-type]
        pg=v.pg,
        seqnum=v.seqnum,
        optype=v.optype,
        evidence=(evidence,),
    )


def _blame(ranks_dumped: tuple[int, ...], blaming: list[_GroupVerdict]) -> FRFinding:
    culprits = tuple(sorted({r for v in blaming for r in v.culprits}))
    ordered = sorted(blaming, key=lambda v: v.started_ns)
    first = ordered[0]
    reason = first.detail
    if len(blaming) > 1:
        reason = (
            f"rank(s) {_ranks(culprits)} never arrived, fell behind or disagreed in {len(blaming)} process "
            f"groups; the earliest: {first.detail}"
        )
    evidence = tuple(
        Evidence(source=v.source, line=0, text=v.detail, signature=FR_SIGNATURE) for v in ordered[:5]
    )
    return FRFinding(
        ranks_dumped=ranks_dumped,
        culprit_ranks=culprits,
        reason=reason,
        kind=first.kind,  # type: ignore[arg-type]
        pg=first.pg,
        seqnum=first.seqnum,
        optype=first.optype,
        evidence=evidence,
    )


def _groups(by_rank: dict[int, FRDump]) -> list[tuple[str, tuple[int, ...]]]:
    seen: set[tuple[str, tuple[int, ...]]] = set()
    for dump in by_rank.values():
        for pg, members in dump.pg_ranks.items():
            if len(members) >= 2:
                seen.add((pg, tuple(sorted(members))))
    return sorted(seen)


def _entries_by_pg(dump: FRDump) -> dict[str, list[FREntry]]:
    grouped: dict[str, list[FREntry]] = {}
    for entry in dump.entries:
        grouped.setdefault(entry.pg_name, []).append(entry)
    return grouped


def _progress(dump: FRDump, rank: int, mine: list[FREntry]) -> _Progress | None:
    collectives = [e for e in mine if not e.is_p2p]
    status = None
    if mine and not any(e.is_p2p for e in mine):
        # pg_status is keyed by the local pg_id, which only the entries tie to the group's name.
        status = dump.pg_status.get(str(mine[0].pg_id))
    if not collectives and status is None:
        return None
    enqueued = max([e.collective_seq_id for e in collectives] + ([status.last_enqueued] if status else []))
    completed_seqs = [e.collective_seq_id for e in collectives if e.state == "completed"]
    if status is not None:
        completed_seqs.append(status.last_completed)
    return _Progress(
        rank=rank,
        enqueued=enqueued,
        completed=max(completed_seqs) if completed_seqs else None,
        by_seq={e.collective_seq_id: e for e in collectives},
    )


def _never_arrived(dump: FRDump, oldest_ns: int | None, waiting_since_ns: int | None) -> bool:
    """No entry of the group although the ring (oldest entry `oldest_ns`) covers the moment the peers
    started waiting."""
    if not dump.entries:
        return True
    if waiting_since_ns is None:
        return False
    return oldest_ns is not None and oldest_ns <= waiting_since_ns


def _oldest_entry_ns(dump: FRDump) -> int | None:
    return min((e.time_created_ns for e in dump.entries if e.time_created_ns is not None), default=None)


@dataclass(frozen=True, slots=True)
class _Index:
    """Per dumped rank, computed once: its entries by process group and its oldest entry's time."""

    by_pg: dict[int, dict[str, list[FREntry]]]
    oldest_ns: dict[int, int | None]


def _judge(
    pg: str, members: tuple[int, ...], by_rank: dict[int, FRDump], index: _Index
) -> _GroupVerdict | None:
    progress: dict[int, _Progress] = {}
    silent: list[int] = []
    for rank in dict.fromkeys(members):
        dump = by_rank.get(rank)
        if dump is None:
            continue
        p = _progress(dump, rank, index.by_pg[rank].get(pg, []))
        if p is None:
            silent.append(rank)
        else:
            progress[rank] = p
    if not progress:
        return None
    pending = [e for p in progress.values() for e in p.pending()]
    oldest_pending = min(pending, key=_created, default=None)
    source = by_rank[next(iter(progress))].name

    missing = tuple(
        r
        for r in silent
        if _never_arrived(
            by_rank[r], index.oldest_ns[r], oldest_pending.time_created_ns if oldest_pending else None
        )
    )
    if missing and oldest_pending is not None:
        waiting = sorted(r for r, p in progress.items() if p.pending())
        return _GroupVerdict(
            "missing-ranks",
            pg,
            missing,
            oldest_pending.collective_seq_id,
            oldest_pending.op,
            f"process group {_label(pg, oldest_pending)}: rank(s) {_ranks(missing)} never joined "
            f"collective #{oldest_pending.collective_seq_id} ({oldest_pending.op}) "
            f"that rank(s) {_ranks(waiting)} wait in",
            by_rank[missing[0]].name,
            _created(oldest_pending),
        )
    if len(progress) < 2:
        return None
    return _mismatch(pg, progress, source) or _behind(pg, progress, source) or _stalled(pg, progress, source)


def _fingerprint(entry: FREntry) -> tuple[str, ...]:
    if entry.op.startswith(_UNEVEN_OPS):
        return (entry.op, entry.input_dtypes)
    return (entry.op, entry.input_sizes, entry.input_dtypes)


def _mismatch(pg: str, progress: dict[int, _Progress], source: str) -> _GroupVerdict | None:
    seqs = Counter(seq for p in progress.values() for seq in p.by_seq)
    for seq in sorted(s for s, n in seqs.items() if n >= 2):
        prints = {r: _fingerprint(p.by_seq[seq]) for r, p in progress.items() if seq in p.by_seq}
        votes = Counter(prints.values()).most_common()
        if len(votes) < 2:
            continue
        (top, top_n), (_, second_n) = votes[0], votes[1]
        culprits = tuple(sorted(r for r, fp in prints.items() if fp != top)) if top_n > second_n else ()
        sample = {
            fp: next(p.by_seq[seq] for r, p in progress.items() if prints.get(r) == fp) for fp, _ in votes
        }
        described = "; ".join(
            f"rank(s) {_ranks(sorted(r for r, f in prints.items() if f == fp))}: "
            f"{e.op} {e.input_sizes} {e.input_dtypes}"
            for fp, e in sample.items()
        )
        entry = sample[top]
        return _GroupVerdict(
            "mismatch",
            pg,
            culprits,
            seq,
            entry.op,
            f"process group {_label(pg, entry)}: ranks disagree about collective #{seq}: {described}",
            source,
            _created(entry),
        )
    return None


def _behind(pg: str, progress: dict[int, _Progress], source: str) -> _GroupVerdict | None:
    for what, value in (("enqueued", _enqueued), ("completed", _completed)):
        levels = {r: value(p) for r, p in progress.items()}
        if None in levels.values():
            continue
        low = min(v for v in levels.values() if v is not None)
        laggards = tuple(sorted(r for r, v in levels.items() if v == low))
        if len(laggards) == len(levels) or 2 * len(laggards) > len(levels):
            continue
        ahead = [p for r, p in progress.items() if r not in laggards]
        awaited = low + 1
        entry = next((p.by_seq[awaited] for p in ahead if awaited in p.by_seq), None)
        peers_level = min(levels[p.rank] or 0 for p in ahead)
        op = entry.op if entry else None
        return _GroupVerdict(
            "behind",
            pg,
            laggards,
            awaited,
            op,
            f"process group {_label(pg, entry)}: rank(s) {_ranks(laggards)} last {what} collective #{low}, "
            f"their peers reached #{peers_level}" + (f" ({op} #{awaited} is where they wait)" if op else ""),
            source,
            _created(entry) if entry else _OLDEST,
        )
    return None


def _stalled(pg: str, progress: dict[int, _Progress], source: str) -> _GroupVerdict | None:
    if not all(p.pending() for p in progress.values()):
        return None
    heads = [p.pending()[0] for p in progress.values()]
    head = min(heads, key=_created)
    return _GroupVerdict(
        "all-stuck",
        pg,
        (),
        head.collective_seq_id,
        head.op,
        f"process group {_label(pg, head)}: all {len(progress)} ranks enqueued #{head.collective_seq_id} "
        f"({head.op}) and none completed it",
        source,
        _created(head),
    )


_OLDEST = 2**63


def _created(entry: FREntry | None) -> int:
    return entry.time_created_ns if entry is not None and entry.time_created_ns is not None else _OLDEST


def _enqueued(p: _Progress) -> int | None:
    return p.enqueued


def _completed(p: _Progress) -> int | None:
    return p.completed


def _label(pg: str, entry: FREntry | None) -> str:
    return f"{pg} ({entry.pg_desc})" if entry is not None and entry.pg_desc else pg


def _ranks(ranks: Iterable[int]) -> str:
    return ", ".join(str(r) for r in ranks)
