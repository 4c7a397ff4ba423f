"""Collectives that processes disagree on, from NCCL's COLL records (`NCCL_DEBUG_SUBSYS=COLL`).

Every rank of a communicator enqueues the same collectives in the same order, so at one opCount its ranks
name the same collective with the same element count. Two processes that name different ones there (one
an AllReduce, the other an AllGather) issued different collectives: the application's own asymmetry, the
reading NCCL's mismatch warnings point at when they ask for these records.

Records compare only where they cannot come from different communicators or from a group call:
- a process counts only when all its kept records name one communicator (a process's communicators are
  told apart by their address, which other processes do not share, so with two of them there is no telling
  which of a peer's records belongs to which); processes compare when their communicators have the same
  size and, where NCCL's init lines name it (2.18+), the same id (commId), so that two communicators of
  one size (tensor- and data-parallel groups of eight) are not taken for one where the logs tell them
  apart; without init lines, same-sized communicators are taken for one;
- an opCount counts only where each process has one record at it (a group call enqueues several
  collectives under one opCount);
- point-to-point records (Send, Recv) differ between the two ends by design and are left out.
The records are a tail signature (`read = "tail"`): the scanner reads the last ones of each process from
the end of each source (`source_scan.TAIL_BYTES`), where a hang leaves them, and never looks for them
elsewhere, so a log full of them costs the scan nothing.
"""

from __future__ import annotations

from collections import defaultdict

from matcher.analysis.rankmap import RankMap, as_int
from matcher.model import Observation

SIGNATURE = "nccl-coll-record"
INIT_SIGNATURE = "nccl-comm-init-rank"
POINT_TO_POINT = frozenset({"Send", "Recv", "SendRecv"})

Process = tuple[object, ...]
Call = tuple[str, int | None]  # (collective, element count)


def _process(obs: Observation, ranks: RankMap) -> Process | None:
    """What tells one process's records from another's: its host and pid (NCCL's line prefix), else its
    rank. (Not the rank first: an init line's rank is the rank in that communicator, so two processes of
    two groups can both be rank 0.)"""
    host, pid = ranks.host(obs), obs.line.pid
    if host is not None and pid is not None:
        return ("process", host, pid)
    rank = ranks.rank(obs)
    return None if rank is None else ("rank", rank)


def disagreement(observations: list[Observation], ranks: RankMap) -> list[Observation]:
    """One record per distinct collective at the first opCount where processes of one communicator
    name different ones, else []."""
    per_process: dict[Process, list[Observation]] = defaultdict(list)
    for obs in observations:
        if obs.signature == SIGNATURE and str(obs.fields.get("optype")) not in POINT_TO_POINT:
            process = _process(obs, ranks)
            if process is not None:
                per_process[process].append(obs)
    ids = _communicator_ids(observations, ranks)
    groups: dict[tuple[object, ...], dict[Process, list[Observation]]] = defaultdict(dict)
    for process, records in per_process.items():
        addresses = {_address(r) for r in records}
        if len(addresses) == 1:  # one communicator: which one, by its id where its init line says it
            size = as_int(records[0].fields.get("comm_ranks"))
            groups[(size, ids.get(_where(records[0], ranks)))][process] = records
    for group in groups.values():
        found = _first_difference(group)
        if found:
            return found
    return []


def _address(obs: Observation) -> str:
    return str(obs.fields.get("comm", "")).lower().removeprefix("0x")


def _where(obs: Observation, ranks: RankMap) -> tuple[object, ...]:
    """A communicator in one process: the process's host and pid, and the communicator's address."""
    return (ranks.host(obs), obs.line.pid, _address(obs))


def _communicator_ids(observations: list[Observation], ranks: RankMap) -> dict[tuple[object, ...], str]:
    """(host, pid, address) -> commId, from NCCL's init lines (2.18+ print the id): processes of two
    communicators of one size are then told apart, which their addresses alone cannot do."""
    return {
        _where(obs, ranks): str(obs.fields["comm_id"]).lower()
        for obs in observations
        if obs.signature == INIT_SIGNATURE and "comm_id" in obs.fields and "comm" in obs.fields
    }


def _first_difference(group: dict[Process, list[Observation]]) -> list[Observation]:
    """The records of the first opCount where processes with one record each name different calls."""
    if len(group) < 2:
        return []
    at: dict[str, dict[Process, list[Observation]]] = defaultdict(lambda: defaultdict(list))
    for process, records in group.items():
        for obs in records:
            at[str(obs.fields.get("op_count")).lower()][process].append(obs)
    for op_count in sorted(at, key=lambda c: int(c, 16)):
        alone = [records[0] for records in at[op_count].values() if len(records) == 1]
        calls: dict[Call, Observation] = {}
        for obs in alone:
            calls.setdefault((str(obs.fields.get("optype")), as_int(obs.fields.get("numel_in"))), obs)
        if len(alone) >= 2 and len(calls) > 1:
            return list(calls.values())
    return []


__all__ = ["POINT_TO_POINT", "SIGNATURE", "disagreement"]
