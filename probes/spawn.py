"""Start this node's ranks of the probe as child processes, under the probe's hard deadline.

Used when `python -m probes.allreduce` runs without torchrun. Each child is `python -m probes.allreduce`
with RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT set, in the spawner's own process group, so a
launcher that kills the spawner's group at its deadline ends the ranks too. Children's stderr is
relayed (progress lines included); on node 0 the result rank 0 printed is passed on, or, when rank 0
printed none before the deadline, a failed result that names the ranks that never checked in.
Stdlib only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO

from probes import progress
from probes.checks import run_tool
from probes.options import ProbeOptions
from probes.report import render_text
from probes.result import ProbeResult, RankResult, find_result_line

# The ranks end themselves 5 s after the deadline; the spawner kills what is left a little later.
KILL_AFTER_DEADLINE_S = 7.0
# Once rank 0 has exited, the others get this long to finish before they are killed.
PEER_GRACE_S = 3.0
CPU_DEFAULT_NPROC = 2
# The status a rank exits with when its own deadline timer fires (probes.allreduce).
SELF_DESTRUCT_STATUS = 3


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def local_gpu_count() -> int:
    out = run_tool(["nvidia-smi", "-L"])
    if out is None or out.returncode != 0:
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def slurm_first_node() -> str | None:
    """Node 0 of the srun step this runs in (SLURM_NODEID counts in the step's node-list order)."""
    nodelist = os.environ.get("SLURM_STEP_NODELIST")
    if not nodelist:
        return None
    out = run_tool(["scontrol", "show", "hostnames", nodelist])
    if out is None or out.returncode != 0 or not out.stdout.strip():
        return None
    return out.stdout.split()[0]


class RankProcess:
    def __init__(self, rank: int, argv: list[str], env: dict[str, str], tracker: progress.Tracker) -> None:
        self.rank = rank
        self.stdout: list[str] = []
        self.process = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lock = threading.Lock()
        self.readers = [
            threading.Thread(target=self._read_stdout, args=(self.process.stdout,), daemon=True),
            threading.Thread(target=self._relay_stderr, args=(self.process.stderr, tracker), daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read_stdout(self, stream: IO[str] | None) -> None:
        for line in stream or ():
            self.stdout.append(line)

    def _relay_stderr(self, stream: IO[str] | None, tracker: progress.Tracker) -> None:
        for line in stream or ():
            with self.lock:
                sys.stderr.write(line)
                sys.stderr.flush()
            tracker.feed(line)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def drain(self) -> None:
        for reader in self.readers:
            reader.join(timeout=2.0)


def spawn_local_ranks(opts: ProbeOptions, argv: list[str]) -> int:
    nproc = opts.nproc or local_gpu_count() or CPU_DEFAULT_NPROC
    world = nproc * opts.nnodes
    addr = opts.master_addr or slurm_first_node() or "127.0.0.1"
    port = opts.master_port or free_port(addr)
    tracker = progress.Tracker()
    children: list[RankProcess] = []

    def stop(signum: int, _frame: object) -> None:
        for child in children:
            child.kill()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    # sshd does not signal a command without a terminal when the client goes away; it closes stdin.
    launcher_gone = threading.Event()
    if opts.watch_stdin:

        def watch() -> None:
            sys.stdin.read()
            launcher_gone.set()

        threading.Thread(target=watch, daemon=True).start()
    started = time.monotonic()
    for local_rank in range(nproc):
        rank = (opts.node_rank or 0) * nproc + local_rank
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(local_rank),
            WORLD_SIZE=str(world),
            LOCAL_WORLD_SIZE=str(nproc),
            MASTER_ADDR=addr,
            MASTER_PORT=str(port),
        )
        children.append(RankProcess(rank, [sys.executable, "-m", "probes.allreduce", *argv], env, tracker))

    kill_at = started + opts.deadline + KILL_AFTER_DEADLINE_S
    leader = children[0] if opts.node_rank == 0 else None
    leader_exited_at: float | None = None
    while any(child.process.poll() is None for child in children):
        now = time.monotonic()
        if leader is not None and leader_exited_at is None and leader.process.poll() is not None:
            leader_exited_at = now
        if now >= kill_at or (leader_exited_at is not None and now - leader_exited_at >= PEER_GRACE_S):
            break
        if launcher_gone.is_set():
            for child in children:
                child.kill()
            return 143
        time.sleep(0.1)
    timed_out = time.monotonic() >= kill_at
    for child in children:
        child.kill()
        child.drain()
    codes = [child.process.returncode for child in children]
    if leader is None:
        return max((abs(code) for code in codes), default=0)
    output = "".join(leader.stdout)
    result = find_result_line(output) if opts.json else None
    if result is not None or (not opts.json and output.strip()):
        sys.stdout.write(output)
        sys.stdout.flush()
        if result is not None:
            return 1 if result.verdict == "failed" else 0
        return 0 if leader.process.returncode == 0 else 1
    synthesized = missing_result(tracker, children, nproc, world, timed_out, opts.deadline)
    sys.stdout.write((synthesized.to_json() if opts.json else render_text(synthesized)) + "\n")
    sys.stdout.flush()
    return 1


def missing_result(
    tracker: progress.Tracker,
    children: list[RankProcess],
    nproc: int,
    world: int,
    timed_out: bool,
    deadline: float,
) -> ProbeResult:
    """A failed result built from what the ranks said on stderr, when rank 0 printed no result."""
    reasons = []
    ranks = []
    for child in children:
        arrived = child.rank in tracker.arrived
        error = tracker.errors.get(child.rank)
        ranks.append(
            RankResult(
                rank=child.rank,
                host=tracker.arrived.get(child.rank),
                arrived=arrived,
                finished=child.rank in tracker.finished,
                error=error,
            )
        )
        if not arrived:
            reasons.append(f"rank {child.rank} never arrived before the {deadline:g} s deadline")
        elif error:
            reasons.append(f"rank {child.rank} failed: {error}")
    code = children[0].process.returncode
    if timed_out:
        reasons.append(f"no result within the {deadline:g} s deadline; ranks killed")
    elif code == SELF_DESTRUCT_STATUS:
        reasons.append("rank 0 ended itself after the deadline without a result")
    else:
        reasons.append(f"rank 0 exited with status {code} without a result")
    return ProbeResult(
        verdict="failed",
        reasons=reasons,
        backend="unknown",
        world_size=world,
        host=socket.gethostname(),
        ranks=ranks,
        hosts=sorted({host for host in tracker.arrived.values() if host}),
        duration_s=None,
        launcher=os.environ.get("NCCLBOT_PROBE_LAUNCHER"),
    )
