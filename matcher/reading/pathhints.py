"""Rank and host hints from a log file's path (folder layouts of launchers and schedulers).

Recognised (case-insensitive; archive members use their member path):

| layout | example | hint |
|---|---|---|
| rank ending the file stem | `rank3.log`, `rank_12.err`, `log_rank-7.txt`, `worker-3.log` | rank |
| Slurm per-task output (`%j.%t`, `slurm-%j_%t`) | `4242.3.out`, `slurm-123_4.out` | rank (task id) |
| torchrun `--log-dir` | `.../attempt_0/3/stderr.log` (`stdout.log`, `error.json`) | rank (see below) |
| Flight Recorder dump names | `nccl_trace_rank_5`, `_dump_5`, `comm_lib_trace_rank_5` | rank |
| node-like folder or file stem | `node-017/rank12.err`, `gpu-node-3/`, `ip-10-0-1-7/`, `nid0012.log` | host |

torchrun's folder number is the *local* rank. It is used as the rank only when no host is found in the
same path (a single-node layout, where local rank == global rank); a multi-node tree keeps rank None, so a
wrong global rank is never invented. `slurm-123_4.out` is also Slurm's default *array* name (`%A_%a`);
we read it as a task id because per-task output of one job is what people hand to a diagnosis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The rank token must end the file stem (`train_rank3.log`) or open a stream-named leaf
# (`rank3_stderr.log`): a descriptive name such as `run-rank2-oom-notes.log` says nothing reliable.
_RANK_IN_NAME = re.compile(
    r"(?:^|[^a-z])(?:rank|worker)[_-]?(\d{1,6})(?:\.[^/]*)?$"
    r"|^(?:rank|worker)[_-]?(\d{1,6})[_.-](?:stdout|stderr|out|err|log)\b",
    re.IGNORECASE,
)
_SLURM_TASK = re.compile(r"^(?:slurm-\d+[_-]|\d+\.)(\d{1,6})\.(?:out|err)$", re.IGNORECASE)
_DUMP_NAME = re.compile(r"(?:dump|trace)[_-]?(?:rank[_-]?)?(\d{1,6})$", re.IGNORECASE)
_TORCHRUN_LEAF = re.compile(r"^(?:stdout\.log|stderr\.log|error\.json)$", re.IGNORECASE)
_ATTEMPT = re.compile(r"^attempt_\d+$")
_HOST = re.compile(
    r"^(?:[a-z0-9]+-)*(?:node|host|gpu|compute|nid|worker|server|dgx|hgx)[-_]?\d+(?:-[a-z0-9]+)*$"
    r"|^ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}$"
    r"|^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class PathHints:
    rank: int | None = None
    host: str | None = None


def hints_from_path(path: str) -> PathHints:
    parts = [p for p in re.split(r"[\\/!]+", path) if p and p not in (".", "..")]
    if not parts:
        return PathHints()
    leaf = parts[-1]
    host = _host_from(parts)
    rank = _rank_from_name(leaf)
    if rank is None and host is None:
        rank = _torchrun_rank(parts)
    return PathHints(rank=rank, host=host)


def _host_from(parts: list[str]) -> str | None:
    # The innermost node-like folder wins; a file stem counts too unless it names a rank.
    leaf_stem = parts[-1].split(".", 1)[0]
    candidates = [*parts[:-1]]
    if not re.match(r"(?i)worker", leaf_stem):
        candidates.append(leaf_stem)
    for part in reversed(candidates):
        if _HOST.match(part):
            return part
    return None


def _rank_from_name(leaf: str) -> int | None:
    for pattern in (_SLURM_TASK, _DUMP_NAME, _RANK_IN_NAME):
        match = pattern.search(leaf)
        if match:
            return int(next(group for group in match.groups() if group is not None))
    return None


def _torchrun_rank(parts: list[str]) -> int | None:
    if len(parts) < 3 or not _TORCHRUN_LEAF.match(parts[-1]) or not _ATTEMPT.match(parts[-3]):
        return None
    return int(parts[-2]) if parts[-2].isdigit() else None
