"""Naming the rank(s) / host(s) that started the failure, or saying why nobody can be named.

A wrong culprit is worse than none, so only these count: root lines on specific ranks or hosts (the
first in time when several ranks hit the same error), the host with Xid lines, a Flight Recorder
finding, the cross-rank table (lagging, absent or disagreeing ranks), torchrun's root-cause block when
the rank died of a root-class reason, and for rank0-only-work the main process itself.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from matcher.analysis import exits
from matcher.analysis.addresses import is_placeholder_host
from matcher.analysis.crossrank import TableVerdict, lone_symmetric_report
from matcher.analysis.rankmap import RankMap, as_int
from matcher.analysis.stacks import StackFinding
from matcher.analysis.timeouts import COLLECTIVE_TIMEOUT, MISSING_RANK, RANK0
from matcher.model import Culprit, FRFinding, Observation
from matcher.rules import rules
from matcher.taxonomy import title

XID_CLASS = "hardware/gpu-xid"
PEER_EXIT = "network/peer-exit"
RENDEZVOUS = "rendezvous/store"
_HOST_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*$|^[0-9a-fA-F:]+$")
# Which classes never name a culprit, whose reporters are not culprits, which exit codes are collateral and
# how a reason names each failure: matcher/rules.toml.
SIMULTANEOUS_S = 1.0


def _failure(class_id: str) -> str:
    return rules().phrases.get(class_id, f"'{title(class_id)}'")


@dataclass(frozen=True, slots=True)
class CulpritDecision:
    culprit: Culprit | None
    no_culprit_reason: str | None


def _clock(t: float | None) -> str:
    return "" if t is None else " at " + time.strftime("%H:%M:%S", time.gmtime(t))


def _who(ranks: Iterable[int], hosts: Iterable[str], rm: RankMap) -> str:
    ranks, hosts = list(ranks), list(hosts)
    if ranks:
        parts = []
        for r in ranks:
            host = rm.host_of.get(r)
            parts.append(f"rank {r} ({host})" if host else f"rank {r}")
        return ", ".join(parts)
    return "host " + ", ".join(hosts)


def _hosts_for(ranks: Iterable[int], observations: Iterable[Observation], rm: RankMap) -> tuple[str, ...]:
    ranks = list(ranks)
    hosts = [rm.host_of[r] for r in ranks if r in rm.host_of]
    hosts += [h for h in (rm.host(o) for o in observations) if h]
    if not hosts and len(rm.hosts) == 1 and _single_node(ranks, rm):
        hosts = list(rm.hosts)  # a single-node job: whichever rank it is, it ran there
    return tuple(dict.fromkeys(hosts))


def _single_node(ranks: list[int], rm: RankMap) -> bool:
    """Seeing one host is not enough: NCCL's lines of one node may sit beside the Python errors of ranks
    on other nodes. The job is known to fit that host only when the world size is known and that host's
    mapped ranks plus the unmapped ones in question account for all of it; rank-less evidence (a host's
    own kernel or NCCL lines pasted alone) has nobody else to belong to."""
    if not ranks:
        return True
    if not rm.world_size:
        return False
    (host,) = rm.hosts
    return rm.world_size <= len(set(rm.ranks_on(host)) | set(ranks))


def _first_time(observations: Iterable[Observation]) -> float | None:
    times = [o.line.time for o in observations if o.line.time is not None]
    return min(times) if times else None


def _relative_to_cascade(t: float | None, cascades: list[Observation]) -> str:
    later = [o.line.time for o in cascades if o.line.time is not None and t is not None and o.line.time > t]
    if t is None or not later:
        return ""
    return f", {min(later) - t:.0f} s before the other ranks failed"


def decide(
    primary: str,
    root_obs: list[Observation],
    cascades: list[Observation],
    observations: list[Observation],
    table: TableVerdict,
    fr: FRFinding | None,
    rm: RankMap,
    rank0_clue: Observation | None,
    stack: StackFinding | None = None,
) -> CulpritDecision:
    """The culprit, never with a loopback or placeholder address as its host: those name the rank's own
    machine or nothing (a masked paste), so they would send an on-call engineer nowhere."""
    decision = _decide(primary, root_obs, cascades, observations, table, fr, rm, rank0_clue, stack)
    return _real_hosts_only(decision)


def _real_hosts_only(decision: CulpritDecision) -> CulpritDecision:
    culprit = decision.culprit
    if culprit is None:
        return decision
    hosts = tuple(h for h in culprit.hosts if not is_placeholder_host(h))
    if hosts == culprit.hosts:
        return decision
    if not hosts and not culprit.ranks:
        dropped = ", ".join(culprit.hosts)
        return CulpritDecision(
            None, f"the only address the logs name ({dropped}) is loopback or masked: it names no machine"
        )
    return CulpritDecision(replace(culprit, hosts=hosts), decision.no_culprit_reason)


def _decide(
    primary: str,
    root_obs: list[Observation],
    cascades: list[Observation],
    observations: list[Observation],
    table: TableVerdict,
    fr: FRFinding | None,
    rm: RankMap,
    rank0_clue: Observation | None,
    stack: StackFinding | None = None,
) -> CulpritDecision:
    if primary in rules().never_named:
        return CulpritDecision(
            None, f"{title(primary)}: a job-wide configuration problem, not one rank's fault"
        )
    if root_obs and primary in rules().reporter_is_not_culprit:
        voted = (
            _from_fr_or_table(fr, table, rm)
            or _from_mismatch_pairs(root_obs, rm)
            or _from_missing_rank_reports(cascades, rm)
        )
        return voted or CulpritDecision(
            None, "the mismatch report names the two ranks that disagree, not which of them is the odd one"
        )
    if root_obs and primary == RENDEZVOUS:
        # The ranks that report a rendezvous failure are its victims; the store host they name is not.
        store_host = _from_rendezvous_peer(root_obs)
        if store_host is not None:
            return store_host
    if root_obs and all(o.signature in rules().waiting_reporters for o in root_obs):
        # Every root line was written by a rank that waited: it names no culprit, other evidence may.
        decision = _decide(primary, [], cascades, observations, table, fr, rm, rank0_clue, stack)
        if decision.culprit is not None:
            return decision
        return CulpritDecision(
            None, "the ranks that report the barrier timeout only waited there; no line names who never came"
        )
    if root_obs:
        decision = _from_root_lines(primary, root_obs, cascades, table, fr, rm)
        if decision.culprit is not None:
            return decision
        fallback = _from_fr_or_table(fr, table, rm) or _from_exits(observations, rm, signals_only=False)
        if fallback is None and primary == RANK0:
            return _decide(primary, [], cascades, observations, table, fr, rm, root_obs[0])
        return fallback or decision
    if fr is None or not fr.culprit_ranks:
        launcher = _from_exits(observations, rm, signals_only=True)
        if launcher:
            return launcher
    if primary == PEER_EXIT:
        peer = _from_peer(cascades, rm)
        if peer:
            return peer
    # A stack dump says what the busy rank was doing, more than the table's "never reached it".
    evidence_based = (
        _from_stacks(stack, primary, rm)
        or _from_fr_or_table(fr, table, rm)
        or _from_missing_rank_reports(cascades, rm)
        or _from_silent_rank(cascades, observations, rm)
    )
    if evidence_based:
        return evidence_based
    if primary == RANK0 and _rank0_implicated(rank0_clue, root_obs, cascades, table, rm):
        host = rm.host_of.get(0)
        # Progress tables pad with runs of spaces: one space each keeps the quote readable in a sentence.
        what = f" ({' '.join(rank0_clue.line.text.split())[:80]})" if rank0_clue is not None else ""
        reason = f"rank 0 was busy with solo work{what} while its peers waited"
        if table.seqnum is not None:
            reason += f" in collective #{table.seqnum} ({table.optype or 'unknown op'}) until the timeout"
        return CulpritDecision(Culprit((0,), (host,) if host else (), reason), None)
    if table.kind == "all-stuck":
        return CulpritDecision(None, table.detail)
    if fr is not None and fr.kind == "all-stuck":
        return CulpritDecision(None, fr.reason)
    if table.seqnum is not None:
        return CulpritDecision(
            None,
            "the ranks that logged the timeout all wait in the same collective and no log shows which rank "
            "never arrived (no rank behind, none missing); Flight Recorder dumps of every rank would tell",
        )
    return CulpritDecision(None, "no line names a failing rank or host")


def _rank0_implicated(
    clue: Observation | None,
    root_obs: list[Observation],
    cascades: list[Observation],
    table: TableVerdict,
    rm: RankMap,
) -> bool:
    """Rank 0 is named only when a line ties the solo work to it or the others visibly waited for it. A clue
    alone (a title saying a checkpoint was being saved) shows no one waiting: it names nobody; a root line
    of the class (a rank waiting in main_process_first) is itself the wait."""
    waited = bool(cascades or table.reporters) or (clue is not None and clue.role == "root")
    if clue is not None and rm.rank(clue) in (0, None) and waited:
        return True
    if any(rm.rank(o) in (0, None) for o in root_obs):
        return True
    if table.culprits == (0,):
        return True
    return bool(table.reporters) and 0 not in table.reporters and not lone_symmetric_report(table)


def _from_root_lines(
    primary: str,
    root_obs: list[Observation],
    cascades: list[Observation],
    table: TableVerdict,
    fr: FRFinding | None,
    rm: RankMap,
) -> CulpritDecision:
    label = _failure(primary)
    if primary == XID_CLASS:
        hosts = tuple(dict.fromkeys(h for h in (rm.host(o) for o in root_obs) if h))
        if hosts:
            flagged = set(fr.culprit_ranks if fr else ()) | set(table.culprits)
            ranks = tuple(
                sorted(
                    {r for r in (rm.rank(o) for o in root_obs) if r is not None}
                    | {r for r in flagged if rm.host_of.get(r) in hosts}
                )
            )
            xids = sorted({str(o.fields["xid"]) for o in root_obs if "xid" in o.fields})
            what = f"Xid {', '.join(xids)}" if xids else "a GPU hardware fault"
            t = _first_time(root_obs)
            reason = f"host {', '.join(hosts)} logged {what}{_clock(t)}{_relative_to_cascade(t, cascades)}"
            return CulpritDecision(Culprit(ranks, hosts, reason), None)

    first_by_rank: dict[int, float] = {}
    for obs in root_obs:
        rank = rm.rank(obs)
        if rank is not None:
            t = obs.line.time if obs.line.time is not None else math.inf
            first_by_rank[rank] = min(first_by_rank.get(rank, math.inf), t)
    everyone = rm.all_ranks()
    if first_by_rank:
        ordered = sorted(first_by_rank, key=lambda r: (first_by_rank[r], r))
        earliest = first_by_rank[ordered[0]]
        everyone_hit = len(ordered) > 1 and len(everyone) > 1 and set(ordered) >= everyone
        many_hit = everyone_hit or (len(ordered) > 2 and 4 * len(ordered) > len(everyone))
        if many_hit:
            # Only a clear lead in time singles one rank out of many that hit the same error.
            simultaneous = math.isinf(earliest) or first_by_rank[ordered[1]] - earliest < SIMULTANEOUS_S
            if simultaneous:
                shared = _shared_host(ordered, root_obs, rm)
                if shared is not None:
                    t_first = None if math.isinf(earliest) else earliest
                    reason = (
                        f"{len(ordered)} ranks, all on host {shared}, hit {label}{_clock(t_first)} "
                        "and none of them stands out: the fault is local to that host"
                    )
                    return CulpritDecision(Culprit((), (shared,), reason), None)
            if math.isinf(earliest):
                return CulpritDecision(
                    None, f"{len(ordered)} ranks hit {label} and no timestamp tells which was first"
                )
            if simultaneous:
                return CulpritDecision(
                    None,
                    f"{len(ordered)} ranks hit {label} at about the same time: none stands out",
                )
            chosen = ordered[:1]
        else:
            chosen = ordered
        hosts = _hosts_for(chosen, [o for o in root_obs if rm.rank(o) in chosen], rm)
        t = min(first_by_rank[r] for r in chosen)
        t_opt = None if math.isinf(t) else t
        when = _clock(t_opt) + _relative_to_cascade(t_opt, cascades)
        reason = f"{_who(chosen, (), rm)} hit {label}{when}"
        return CulpritDecision(Culprit(tuple(chosen), hosts, reason), None)

    hosts = tuple(dict.fromkeys(h for h in (rm.host(o) for o in root_obs) if h))
    if len(hosts) == 1:
        t = _first_time(root_obs)
        reason = f"host {hosts[0]} logged {label}{_clock(t)}{_relative_to_cascade(t, cascades)}"
        return CulpritDecision(Culprit((), hosts, reason), None)
    if len(hosts) > 1:
        return CulpritDecision(None, f"{label} was logged on {len(hosts)} hosts; no single host stands out")
    return CulpritDecision(None, f"the lines reporting {label} carry no rank or host")


def _shared_host(hit: list[int], root_obs: list[Observation], rm: RankMap) -> str | None:
    """The one host every failing rank runs on, when the job also has ranks that did not fail: other
    hosts, known ranks beyond the failing ones, or rank numbers beyond the failing count (ranks are
    numbered from 0, so rank 14 implies fourteen peers)."""
    hosts = {rm.host_of.get(r) for r in hit} | {rm.host(o) for o in root_obs}
    host = hosts.pop() if len(hosts) == 1 else None
    if host is None:
        return None
    others_exist = bool(rm.hosts - {host}) or bool(rm.all_ranks() - set(hit)) or max(hit) >= len(hit)
    return host if others_exist else None


def _from_fr_or_table(fr: FRFinding | None, table: TableVerdict, rm: RankMap) -> CulpritDecision | None:
    if fr is not None and fr.culprit_ranks:
        ranks = fr.culprit_ranks
        return CulpritDecision(
            Culprit(ranks, _hosts_for(ranks, (), rm), f"Flight Recorder: {fr.reason}"), None
        )
    if table.culprits:
        ranks = table.culprits
        return CulpritDecision(Culprit(ranks, _hosts_for(ranks, (), rm), table.detail), None)
    return None


def _from_stacks(stack: StackFinding | None, primary: str, rm: RankMap) -> CulpritDecision | None:
    """Stack dumps single out the busy ranks only for the class their activity names."""
    if stack is None or stack.class_id != primary:
        return None
    return CulpritDecision(Culprit(stack.ranks, _hosts_for(stack.ranks, (), rm), stack.reason), None)


def _from_mismatch_pairs(root_obs: list[Observation], rm: RankMap) -> CulpritDecision | None:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL: every rank reports a mismatch naming itself and one peer ("Rank 1
    is running X, but Rank 2 is running Y"). The odd one out is the rank in every reported pair, once
    at least two different pairs were reported (one pair alone cannot say which side differs)."""
    pairs = set()
    for obs in root_obs:
        me, other = as_int(obs.fields.get("pg_rank")), as_int(obs.fields.get("other_rank"))
        if me is not None and other is not None and me != other:
            pairs.add(frozenset((me, other)))
    if len(pairs) < 2:
        return None
    common = frozenset.intersection(*pairs)
    if len(common) != 1:
        return None
    (odd,) = common
    reason = (
        f"rank {odd} is the odd one out: each of {len(pairs)} mismatch reports pairs it with another rank "
        "(its collective differs from the majority's)"
    )
    return CulpritDecision(Culprit((odd,), _hosts_for([odd], (), rm), reason), None)


def _from_missing_rank_reports(cascades: list[Observation], rm: RankMap) -> CulpritDecision | None:
    """Monitored-barrier and desync-debug reports name the rank(s) that never arrived."""
    reports = [o for o in cascades if o.symptom == MISSING_RANK and "rank" in o.fields]
    ranks = tuple(sorted({r for r in (as_int(o.fields["rank"]) for o in reports) if r is not None}))
    if not ranks:
        return None
    reason = f"{_who(ranks, (), rm)} never arrived: {reports[0].line.text.strip()[:160]}"
    return CulpritDecision(Culprit(ranks, _hosts_for(ranks, (), rm), reason), None)


def _from_silent_rank(
    cascades: list[Observation], observations: list[Observation], rm: RankMap
) -> CulpritDecision | None:
    """Each rank wrote its own file; all but one reported the collective timing out and that one reported
    no failure at all: it never joined the collective the others waited in. Where some rank has no file,
    its silence may only be a file left out, so nothing is said."""
    timed_out = {
        r for r in (rm.rank(o) for o in cascades if o.symptom == COLLECTIVE_TIMEOUT) if r is not None
    }
    world = rm.all_ranks()
    if len(timed_out) < 2 or not world or not world <= rm.with_own_file:
        return None
    silent = sorted(world - exits.reporting_ranks(observations, rm))
    if len(silent) != 1:
        return None
    waiting = ", ".join(str(r) for r in sorted(timed_out))
    reason = (
        f"ranks {waiting} timed out waiting in a collective; rank {silent[0]}'s own log reports no failure:"
        " it never joined that collective"
    )
    return CulpritDecision(Culprit((silent[0],), _hosts_for(silent, (), rm), reason), None)


def _from_peer(cascades: list[Observation], rm: RankMap) -> CulpritDecision | None:
    peers = {str(o.fields["peer"]) for o in cascades if "peer" in o.fields}
    hosts = tuple(sorted({p.split("<")[0].rsplit(":", 1)[0] if "<" in p else p for p in peers}))
    if len(hosts) != 1:
        return None
    return CulpritDecision(
        Culprit(
            (), hosts, f"the surviving ranks lost their connection to {hosts[0]}: its process exited first"
        ),
        None,
    )


def _peer_host(peer: str) -> str | None:
    """ "gpu-3<48211>", "[10.0.0.1]:29500", "master-0" -> the machine; None for no machine at all."""
    host = peer.split("<")[0].strip().strip("[]")
    if host.count(":") == 1:  # host:port (an IPv6 address has several colons)
        host = host.split(":")[0]
    host = host.strip("[]")
    if not host or is_placeholder_host(host) or not _HOST_NAME.match(host):
        return None
    return host


def _from_rendezvous_peer(root_obs: list[Observation]) -> CulpritDecision | None:
    """Every rendezvous failure names one store / master host: that host (down, not listening, or a
    name that does not resolve) is where the job broke, not the ranks that tried to reach it."""
    hosts = {h for h in (_peer_host(str(o.fields["peer"])) for o in root_obs if "peer" in o.fields) if h}
    if len(hosts) != 1:
        return None
    host = hosts.pop()
    reason = f"the ranks could not reach the rendezvous host {host} (MASTER_ADDR): no such name, or no answer"
    return CulpritDecision(Culprit((), (host,), reason), None)


def _from_exits(observations: list[Observation], rm: RankMap, signals_only: bool) -> CulpritDecision | None:
    """An ordinary Python exception on one rank, else the launchers' record of the first worker to die.
    Without a root line, a rank that exited with a plain error code may only have seen the aborted
    communicator; then only a death by signal (SIGKILL, SIGSEGV, SIGBUS...) marks it as the first to go,
    or an exit while the other ranks reported failures and it reported none."""
    raised = exits.first_exception(observations, rm)
    if raised is not None:
        hosts = (raised.host,) if raised.host else _hosts_for([raised.rank], [raised.obs], rm)
        return CulpritDecision(Culprit((raised.rank,), hosts, raised.reason()), None)
    death = exits.first_failure(observations, rm)
    if death is None:
        return None
    if signals_only and not death.abrupt and not exits.died_silently(death, observations, rm):
        return None
    if death.rank is None and death.host is None:
        return None
    ranks = (death.rank,) if death.rank is not None else ()
    hosts = (death.host,) if death.host else _hosts_for(ranks, (), rm) if ranks else ()
    launcher = death.launcher
    detail = f" (exit code {death.code})" if death.code is not None and death.signal is not None else ""
    reason = f"{launcher} records {death.who()} as the first failure: it {death.how()}{detail}"
    return CulpritDecision(Culprit(ranks, hosts, reason), None)
