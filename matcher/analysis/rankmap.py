"""Who is who: global rank <-> host <-> GPU, and which ranks the bundle knows about.

Sources, strongest first: NCCL context lines (init lines with rank, host, device, world_size; channel
lines with the rank; their `host:pid` prefix ties later NCCL lines of the same process to that rank; a
process in several communicators gets the rank of the largest), rank/host attributes the reader peeled
off line prefixes or file paths, torchrun failure entries (rank, host, exit code) and per-file summaries.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from matcher.model import FieldValue, Observation, SourceSummary

# How far below a shell prompt pasted command output still belongs to the prompt's host (dmesg and
# nvidia-smi outputs are long; a paste that goes on past this is probably something else).
PROMPT_REACH_LINES = 200


def as_int(value: FieldValue | None) -> int | None:
    if value is None or isinstance(value, float):
        return None if value is None else int(value)
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        return None


@dataclass(slots=True)
class RankMap:
    host_of: dict[int, str] = field(default_factory=dict)
    device_of: dict[int, str] = field(default_factory=dict)
    rank_of_process: dict[tuple[str, int], int] = field(default_factory=dict)  # (host, pid) -> rank
    known: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    world_size: int | None = None
    with_own_file: set[int] = field(default_factory=set)  # ranks whose output is a file of its own
    tasks_count_nodes: set[str] = field(default_factory=set)  # sources where srun started a launcher per node
    # source -> sorted (line number, host) of shell prompts that ran a host diagnostic there
    prompts: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    def rank(self, obs: Observation) -> int | None:
        """The global rank an observation belongs to, or None when nothing ties it to one."""
        rank = as_int(obs.fields.get("rank"))
        if rank is not None:
            return rank
        if obs.line.rank is not None:
            return obs.line.rank
        host, pid = self.host(obs), obs.line.pid
        if host is not None and pid is not None:
            return self.rank_of_process.get((host, pid))
        return None

    def host(self, obs: Observation) -> str | None:
        host = obs.fields.get("host")
        if host is not None:
            return str(host)
        if obs.line.host is not None:
            return obs.line.host
        rank = as_int(obs.fields.get("rank"))
        if rank is None:
            rank = obs.line.rank
        if rank is not None and rank in self.host_of:
            return self.host_of[rank]
        return self._prompt_host(obs)

    def _prompt_host(self, obs: Observation) -> str | None:
        """The host of the nearest shell prompt above this line, for output pasted under it."""
        prompts = self.prompts.get(obs.line.source)
        if not prompts:
            return None
        at = bisect.bisect_left(prompts, (obs.line.lineno, "")) - 1
        if at < 0 or obs.line.lineno - prompts[at][0] > PROMPT_REACH_LINES:
            return None
        return prompts[at][1]

    def ranks_on(self, host: str) -> list[int]:
        return sorted(r for r, h in self.host_of.items() if h == host)

    def all_ranks(self) -> set[int]:
        if self.world_size and self.world_size > len(self.known):
            return set(range(self.world_size))
        return set(self.known)


def build_rank_map(observations: Iterable[Observation], sources: Iterable[SourceSummary]) -> RankMap:
    rm = RankMap()
    for summary in sources:
        if not summary.labels_are_ranks:
            rm.tasks_count_nodes.add(summary.name)
        if summary.rank is not None:
            rm.known.add(summary.rank)
            rm.with_own_file.add(summary.rank)
            if summary.host:
                rm.host_of.setdefault(summary.rank, summary.host)
        rm.known.update(summary.ranks_seen)
        if summary.host:
            rm.hosts.add(summary.host)
    claims: dict[tuple[str, int], list[Observation]] = defaultdict(list)
    prompts: list[tuple[str, int, str]] = []
    for obs in observations:
        line_host = obs.line.host
        if line_host:
            rm.hosts.add(line_host)
        if obs.line.rank is not None:
            rm.known.add(obs.line.rank)
            if line_host:
                rm.host_of.setdefault(obs.line.rank, line_host)
        world = as_int(obs.fields.get("world_size"))
        if world is not None and world > 0:
            rm.world_size = max(rm.world_size or 0, world)
        rank = as_int(obs.fields.get("rank"))
        if rank is None:
            if obs.role == "context" and "host" in obs.fields and obs.line.host is None:
                prompts.append((obs.line.source, obs.line.lineno, str(obs.fields["host"])))
            continue
        if obs.role != "context":
            # torchrun's failure entries name a rank and the agent's host: a mapping, not membership.
            if "host" in obs.fields and "exit_code" in obs.fields:
                rm.host_of.setdefault(rank, str(obs.fields["host"]))
            continue
        host = obs.fields.get("host") or line_host
        if host and obs.line.pid is not None:
            claims[(str(host), obs.line.pid)].append(obs)
        else:
            _record(rm, rank, str(host) if host else None, obs)
    for (host, pid), said in claims.items():
        chosen = _global_claim(said)
        rank = as_int(chosen.fields.get("rank")) if chosen is not None else None
        if chosen is not None and rank is not None:
            rm.rank_of_process[(host, pid)] = rank
            _record(rm, rank, host, chosen)
    for source, lineno, host in sorted(prompts):
        rm.prompts.setdefault(source, []).append((lineno, host))
    return rm


def _record(rm: RankMap, rank: int, host: str | None, obs: Observation) -> None:
    rm.known.add(rank)
    # First mapping wins: the default communicator initialises first.
    if host:
        rm.host_of.setdefault(rank, host)
        rm.hosts.add(host)
    device = obs.fields.get("device")
    if device is not None:
        rm.device_of.setdefault(rank, str(device))


def _global_claim(said: list[Observation]) -> Observation | None:
    """The line that gives one process's global rank. A process in several communicators (data, tensor,
    pipeline groups) prints a different rank for each: the largest communicator is the global one; lines
    without a size (channel lines) only count when they all agree. Ambiguity maps nothing: a wrong rank
    would name a wrong culprit."""
    sized = [o for o in said if (as_int(o.fields.get("world_size")) or 0) > 0]
    if sized:
        largest = max(as_int(o.fields["world_size"]) or 0 for o in sized)
        said = [o for o in sized if as_int(o.fields["world_size"]) == largest]
    ranks = {as_int(o.fields["rank"]) for o in said}
    return said[0] if len(ranks) == 1 else None
