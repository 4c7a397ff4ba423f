"""Culprits from the launchers' own records of how each worker ended, and from a Python exception.

Launchers write down which worker died first and how: torchrun's `failed (exitcode: N) local_rank: R`
lines and its "Root Cause (first observed failure)" entry, torch.multiprocessing.spawn's "process N
terminated with ..." / "-- Process N terminated with the following error", Slurm's `srun: error: node:
task N: ...`, Ray's dead worker / actor with its node address. Those records outrank what the surviving
ranks say ("Connection closed by remote peer", "remote process exited"): the survivors only lost the
worker the record names. The exit code says more: -9 / SIGKILL is usually the host OOM killer, -11 a
crash, -6 / SIGABRT and -15 / SIGTERM are collateral (the watchdog or the agent taking ranks down).

When the first failure is an ordinary Python exception on one rank (not a report of a distributed
failure), that rank is the culprit and the exception type with its file:line is the reason.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from matcher.analysis.addresses import is_placeholder_host
from matcher.analysis.hostscope import GPUS_PER_HOST
from matcher.analysis.rankmap import RankMap, as_int
from matcher.model import Observation
from matcher.rules import rules

# Two reports this close in time are simultaneous: neither can be called first.
SIMULTANEOUS_S = 1.0
_LAUNCHERS = (
    ("torchrun-", "torchrun"),
    ("elastic-", "torchrun"),
    ("spawn-", "torch.multiprocessing.spawn"),
    ("srun-", "Slurm"),
    ("ray-", "Ray"),
    ("mpirun-", "Open MPI"),
    ("deepspeed-", "DeepSpeed"),
)
# srun's record of a single task ("task 3: Killed"), not of a range ("tasks 0-6: Terminated").
_ONE_TASK = re.compile(r"\btask \d+: ")
# A traceback's lines end within this many lines of its "Traceback" header (the signature's `after`).
TRACEBACK_LINES = 40


@dataclass(frozen=True, slots=True)
class ExitRecord:
    """One worker's end as a launcher recorded it."""

    obs: Observation
    rank: int | None  # global rank, where the record or the job's shape says it
    local_rank: int | None
    host: str | None  # a real machine (never loopback or a placeholder)
    code: int | None
    signal: str | None  # SIGKILL, SIGSEGV, ...
    first_observed: bool  # torchrun's Root Cause entry
    time: float | None  # when it was written (the earliest timed record of the worker, once merged)

    @property
    def collateral(self) -> bool:
        if self.code is not None and self.code in rules().collateral_exit_codes:
            return True
        return self.signal in ("SIGABRT", "SIGTERM", "SIGINT", "SIGHUP")

    @property
    def abrupt(self) -> bool:
        """The process died rather than exited: a signal, or a worker Ray found dead."""
        return self.signal is not None or self.obs.signature.startswith("ray-")

    @property
    def failed(self) -> bool:
        """Died by itself: not collateral, and abruptly or with a non-zero exit code."""
        if self.collateral:
            return False
        return self.abrupt or (self.code is not None and self.code != 0)

    @property
    def launcher(self) -> str:
        for prefix, name in _LAUNCHERS:
            if self.obs.signature.startswith(prefix):
                return name
        return "the launcher"

    def who(self) -> str:
        if self.rank is not None:
            where = f" ({self.host})" if self.host else ""
            return f"rank {self.rank}{where}"
        if self.local_rank is not None:
            return f"local rank {self.local_rank}" + (f" on {self.host}" if self.host else "")
        return f"the worker on {self.host}" if self.host else "a worker"

    def how(self) -> str:
        if self.signal is None and self.abrupt:
            return "died unexpectedly"
        if self.signal is not None:
            return f"was killed by {self.signal}" if self.signal == "SIGKILL" else f"died of {self.signal}"
        return f"exited with code {self.code}"


@dataclass(frozen=True, slots=True)
class Raised:
    """An ordinary Python exception one rank raised."""

    obs: Observation
    rank: int
    host: str | None
    exception: str
    where: str | None  # "train.py:61"

    def reason(self) -> str:
        at = f" at {self.where}" if self.where else ""
        host = f" ({self.host})" if self.host else ""
        return f"rank {self.rank}{host} raised {self.exception}{at} before the other ranks failed"


def _single_node(observations: list[Observation], rm: RankMap) -> bool:
    """Local rank = global rank only for a job that shows no second machine and no network channel."""
    hosts = {h for h in rm.hosts if not is_placeholder_host(h)}
    hosts |= {h for h in (rm.host(o) for o in observations) if h and not is_placeholder_host(h)}
    if len(hosts) > 1 or (rm.world_size or 0) > GPUS_PER_HOST:
        return False
    # torchrun's failure entries give both ranks: a worker whose global rank differs from its local rank
    # ran on a second or later machine, so the job spans several.
    for obs in observations:
        rank, local = as_int(obs.fields.get("rank")), as_int(obs.fields.get("local_rank"))
        if rank is not None and local is not None and rank != local:
            return False
    return not any(str(o.fields.get("transport", "")).startswith("NET/") for o in observations)


def _signal(obs: Observation, code: int | None) -> str | None:
    word = obs.fields.get("signal")
    if word is not None and str(word).isdigit():  # mpirun: "exited on signal 9"
        return rules().signal_name(-int(str(word)))
    if word is not None:
        return rules().normal_signal(str(word))
    if code is None and as_int(obs.fields.get("error_code")) == 137:
        return "SIGKILL"
    return rules().signal_name(code) if code is not None else None


def records(observations: list[Observation], rm: RankMap) -> list[ExitRecord]:
    """Every launcher exit record in the bundle, in the order the observations came."""
    known = rules().exit_records
    one_node = _single_node(observations, rm)
    # srun starting one task per rank numbers its tasks as the ranks; srun starting torchrun per node
    # (seen in the file's head, or by torchrun's own records) numbers the nodes.
    torchrun = any(o.signature.startswith(("torchrun-", "elastic-")) for o in observations)
    found = []
    for obs in observations:
        if obs.signature not in known:
            continue
        code = as_int(obs.fields.get("exit_code"))
        local = as_int(obs.fields.get("local_rank"))
        rank = as_int(obs.fields.get("rank"))
        if rank is None and local is not None and one_node:
            rank = local
        if rank is None and obs.signature.startswith("ray-"):
            rank = rm.rank(obs)
        task = as_int(obs.fields.get("task"))
        tasks_are_ranks = not torchrun and obs.line.source not in rm.tasks_count_nodes
        one_task = task is not None and _ONE_TASK.search(obs.line.text) is not None  # not "tasks 0-6"
        if rank is None and obs.signature.startswith("srun-") and tasks_are_ranks and one_task:
            rank = task
        host = obs.fields.get("host")
        host = str(host) if host is not None else rm.host(obs)
        if host is not None and is_placeholder_host(host):
            host = None
        found.append(
            ExitRecord(
                obs=obs,
                rank=rank,
                local_rank=local,
                host=host,
                code=code,
                signal=_signal(obs, code),
                first_observed=obs.signature in rules().first_observed,
                time=obs.line.time,
            )
        )
    return found


def first_failure(observations: list[Observation], rm: RankMap) -> ExitRecord | None:
    """The worker that failed first by the launchers' records: torchrun's Root Cause entry when it died
    by itself, else the one failed record, else the clearly earliest of several; None when unclear."""
    failed = [r for r in records(observations, rm) if r.failed]
    if not failed:
        return None
    rooted = [_merge(r, failed) for r in failed if r.first_observed]
    if len({_identity(r) for r in rooted}) > 1:
        # One Root Cause entry per agent of a multi-node job: a death by signal is the cause the others'
        # plain exits followed, or the one worker that exited without a word; else the clearly earliest;
        # else the first one, as before.
        silent = [r for r in rooted if died_silently(r, observations, rm)]
        one_silent = silent[0] if len({_identity(r) for r in silent}) == 1 else None
        return _only_abrupt(rooted) or one_silent or _clearly_first(rooted) or rooted[0]
    if rooted:
        return rooted[0]
    workers = {_identity(r) for r in failed}
    if len(workers) == 1:
        return _merge(failed[0], failed)
    first = _clearly_first(failed)
    return _merge(first, failed) if first is not None else None


def _only_abrupt(found: list[ExitRecord]) -> ExitRecord | None:
    abrupt = [r for r in found if r.abrupt]
    return abrupt[0] if len({_identity(r) for r in abrupt}) == 1 else None


def _clearly_first(found: list[ExitRecord]) -> ExitRecord | None:
    timed = sorted((r.time, i) for i, r in enumerate(found) if r.time is not None)
    if len(timed) >= 2 and timed[1][0] - timed[0][0] >= SIMULTANEOUS_S:
        return found[timed[0][1]]
    return None


def _identity(record: ExitRecord) -> tuple[object, ...]:
    if record.rank is not None:
        return ("rank", record.rank)
    return ("local", record.local_rank, record.host)


def _merge(chosen: ExitRecord, failed: list[ExitRecord]) -> ExitRecord:
    """Fill what the chosen record lacks (a host, a signal) from other records of the same worker."""
    # A record without a global rank is the same worker when its agent wrote it (the same file).
    same = [
        r
        for r in failed
        if _identity(r) == _identity(chosen)
        or (
            r.rank is None
            and r.local_rank == chosen.local_rank
            and r.obs.line.source == chosen.obs.line.source
        )
    ]
    host = chosen.host or next((r.host for r in same if r.host), None)
    signal = chosen.signal or next((r.signal for r in same if r.signal), None)
    times = [r.time for r in (chosen, *same) if r.time is not None]
    return ExitRecord(
        chosen.obs,
        chosen.rank,
        chosen.local_rank,
        host,
        chosen.code,
        signal,
        chosen.first_observed,
        min(times) if times else None,
    )


def reporting_ranks(observations: list[Observation], rm: RankMap) -> set[int]:
    """The ranks whose own lines report a failure (a root or cascade line other than a launcher's record
    of how a worker ended)."""
    record_ids = rules().exit_records
    ranks = {
        rm.rank(o) for o in observations if o.role in ("root", "cascade") and o.signature not in record_ids
    }
    return {r for r in ranks if r is not None}


def died_silently(record: ExitRecord, observations: list[Observation], rm: RankMap) -> bool:
    """The launcher stopped the other workers and the dead worker's own lines report no failure: it did
    not exit over a peer it lost, so its plain exit code marks where the job broke. Where the launcher's
    exit code also stands for any uncaught exception (torchrun), other ranks must have reported a failure
    (a lost peer, a timeout) too; a launcher that reports exceptions apart (rules.toml
    exits.plain_exit_apart: spawn) needs no such report."""
    if record.rank is None:
        return False
    # Only where the launcher's own output is there, stopping the other workers (SIGTERM to their pids):
    # a paste of one survivor's lines beside a record says nothing of what the dead worker wrote.
    stopped = {
        str(o.fields["pid"])
        for o in observations
        if "pid" in o.fields and rules().normal_signal(str(o.fields.get("signal", ""))) == "SIGTERM"
    }
    stopped.discard(str(record.obs.fields.get("pid")))
    if not stopped:
        return False
    reporters = reporting_ranks(observations, rm)
    if record.rank in reporters:
        return False
    return bool(reporters) or record.obs.signature in rules().plain_exit_apart


def teardown_echoes(observations: list[Observation], rm: RankMap) -> frozenset[int]:
    """Indices of the lines that only echo the job's teardown after a worker died by a signal (or exited
    without a word while its peers lost it).

    When a worker is killed, its agent stops the job; on a multi-node torchrun the agent hosting the c10d
    store goes with it, and the other agents' store calls and rendezvous shutdown then fail. Those lines
    (classes in rules.toml `exits.teardown_classes`) are written after the death, by time or further down
    a file whose timed lines have passed it; written before it, they may be the cause and stay roots."""
    death = first_failure(observations, rm)
    if death is None or death.time is None:
        return frozenset()
    if not (death.abrupt or died_silently(death, observations, rm)):
        return frozenset()  # a plain exit may itself follow a lost store: nothing says which came first
    # Where each file's lines reach the death: untimed lines (tracebacks) below that point follow it too.
    reached: dict[str, int] = {}
    for obs in observations:
        if obs.line.time is not None and obs.line.time >= death.time:
            source = obs.line.source
            reached[source] = min(reached.get(source, obs.line.lineno), obs.line.lineno)
    teardown = rules().teardown_classes
    return frozenset(
        i
        for i, obs in enumerate(observations)
        if obs.role in ("root", "cascade")
        and obs.classes
        and set(obs.classes) <= teardown
        and obs.line.source in reached
        and obs.line.lineno >= reached[obs.line.source]
        and (obs.line.time is None or obs.line.time >= death.time)
    )


def signal_class(record: ExitRecord | None) -> str | None:
    """The class a death by signal stands for (SIGKILL -> system/host-oom), if any."""
    if record is None or record.signal is None:
        return None
    return rules().signal_classes.get(record.signal)


def _is_report(obs: Observation, observations: list[Observation], rm: RankMap) -> bool:
    """A traceback that ends in a line another signature read as a failure report (NCCL error, CUDA
    error, store timeout...) of the same rank is that report, not an ordinary exception."""
    end = obs.line.lineno + TRACEBACK_LINES
    rank = rm.rank(obs)
    return any(
        o.role in ("root", "cascade")
        and o.signature not in rules().exit_records
        and o.line.source == obs.line.source
        and obs.line.lineno <= o.line.lineno <= end
        and rm.rank(o) == rank
        for o in observations
    )


def first_exception(observations: list[Observation], rm: RankMap) -> Raised | None:
    """The one rank (or the clearly first of several) that raised an ordinary Python exception."""
    one_node = _single_node(observations, rm)
    cascade_types = rules().cascade_exceptions
    raised: dict[int, Raised] = {}
    for obs in observations:
        exception = obs.fields.get("exception")
        if exception is None:
            continue
        name = str(exception)
        if name.rsplit(".", 1)[-1] in cascade_types or _is_report(obs, observations, rm):
            continue
        rank = rm.rank(obs)
        if rank is None and one_node:
            rank = as_int(obs.fields.get("local_rank"))
        if rank is None:
            continue
        where = None
        if "code_file" in obs.fields:
            where = f"{obs.fields['code_file']}:{obs.fields.get('code_line', '?')}"
        host = rm.host(obs)
        host = None if host is None or is_placeholder_host(host) else host
        current = raised.get(rank)
        if current is None or _earlier(obs, current.obs):
            raised[rank] = Raised(obs, rank, host, name, where)
    if len(raised) == 1:
        return next(iter(raised.values()))
    timed = sorted(
        (r.obs.line.time if r.obs.line.time is not None else math.inf, r.rank) for r in raised.values()
    )
    if len(timed) >= 2 and not math.isinf(timed[0][0]) and timed[1][0] - timed[0][0] >= SIMULTANEOUS_S:
        return raised[timed[0][1]]
    return None


def _earlier(a: Observation, b: Observation) -> bool:
    if a.line.time is not None and b.line.time is not None:
        return a.line.time < b.line.time
    return (a.line.source, a.line.lineno) < (b.line.source, b.line.lineno)
