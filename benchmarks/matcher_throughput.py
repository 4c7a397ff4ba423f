"""Matcher throughput against `grep -c -F` on the log shapes users produce, plus the diagnosis's peak RSS.

    python benchmarks/matcher_throughput.py                      # all three shapes at their full sizes
    python benchmarks/matcher_throughput.py --shape setup-flood  # one shape
    python benchmarks/matcher_throughput.py --scale 0.1          # every shape at a tenth of its size
    python benchmarks/matcher_throughput.py --shape bundle --size-mb 2048 --ranks 1024   # the 2 GB job
    python benchmarks/matcher_throughput.py --log PATH --expect CLASS   # measure an existing log or folder

Shapes (generated under a temp dir, streamed, never held in memory; deleted afterwards unless --keep):

- `setup-flood`: one 400 MB interleaved file of a 512-rank job run with NCCL_DEBUG=INFO, where
  communicators are created throughout training, so NCCL's setup lines (Bootstrap, NET/IB, Init START,
  every Channel line, Connected all rings/trees, Init COMPLETE) recur between the steps; an Xid on one
  host, IB completion errors and watchdog timeouts at the end (expected: hardware/gpu-xid).
- `bundle`: a 1 GB torchrun `--log-dir` tree of 256 rank files (`<host>/attempt_0/<local_rank>/
  stderr.log`) with NCCL_DEBUG_SUBSYS=INIT,COLL: init lines, one COLL line per collective, a progress
  line per step; one rank runs out of GPU memory and the others time out (expected: cuda/oom, that rank).
- `steady`: the 400 MB single file of a 64-rank job (init once, then per-collective INFO lines and step
  logs; Xid, IB errors and timeouts at the end), the shape this benchmark measured first.

Per shape, in the same run, it times `LC_ALL=C grep -c -F -f <7 keywords>` (`-r` on a folder) and the whole
diagnosis (`matcher.pipeline.diagnose`, start-up included) in a child process, interleaved and best of
`--repeat`, and prints both throughputs, their ratio (target >= 0.5, stretch >= 1.0; also the median of the
runs side by side, and the ratio of CPU seconds: the ceiling on a machine busy with other work), the
child's peak RSS (its own and its workers', target < 300 MB) and whether the diagnosis is the expected
one. It asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
# What someone triaging by hand would grep a job's logs for.
GREP_KEYWORDS = [
    "NCCL WARN",
    "Watchdog caught collective operation timeout",
    "NVRM: Xid",
    "out of memory",
    "Traceback (most recent call last)",
    "ChildFailedError",
    "ncclSystemError",
]
GPUS_PER_HOST = 8


def _host(rank: int) -> str:
    return f"gpu-node-{rank // GPUS_PER_HOST:03d}"


def _nccl(rank: int, pid: int, tid: int, text: str) -> str:
    return f"{_host(rank)}:{pid}:{tid} [{rank % GPUS_PER_HOST}] NCCL INFO {text}\n"


# ---- lines common to the shapes ------------------------------------------------------------------


def _comm_init(rank: int, ranks: int, pid: int, tid: int, comm: int, channels: int) -> Iterator[str]:
    """What NCCL_DEBUG=INFO prints when one rank joins one communicator (the network set-up lines only
    for a process's first one)."""
    local = rank % GPUS_PER_HOST
    bus = f"{(local + 1) * 0x10:x}000"
    comm_id = f"0x5c1e2f3a4b{comm:06x}"
    if comm == 0:
        yield _nccl(rank, pid, tid, f"Bootstrap : Using ib0:10.1.{rank // 250}.{rank % 250}<0>")
        plugin = "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."
        yield _nccl(rank, pid, tid, plugin)
        yield _nccl(
            rank, pid, tid, f"NET/IB : Using [0]mlx5_{local}:1/IB [RO]; OOB ib0:10.1.0.{rank % 250}<0>"
        )
        yield _nccl(rank, pid, tid, "Using network IB")
    yield _nccl(
        rank,
        pid,
        tid,
        f"ncclCommInitRank comm 0x7f{comm:02x}{rank:06x} rank {rank} nranks {ranks} cudaDev {local} "
        f"nvmlDev {local} busId {bus} commId {comm_id} - Init START",
    )
    yield _nccl(rank, pid, tid, f"Setting affinity for GPU {local} to ffff,ffffffff")
    yield _nccl(
        rank,
        pid,
        tid,
        f"comm 0x7f{comm:02x}{rank:06x} rank {rank} nRanks {ranks} nNodes {max(ranks // GPUS_PER_HOST, 1)} "
        f"localRanks {GPUS_PER_HOST} localRank {local} MNNVL 0",
    )
    peer = (rank + 1) % ranks
    for channel in range(channels):
        via = "P2P/IPC/read" if peer // GPUS_PER_HOST == rank // GPUS_PER_HOST else f"NET/IB/{local}/GDRDMA"
        yield _nccl(
            rank,
            pid,
            tid,
            f"Channel {channel:02d}/0 : {rank}[{local}] -> {peer}[{peer % GPUS_PER_HOST}] via {via}",
        )
    yield _nccl(rank, pid, tid, "Connected all rings")
    yield _nccl(rank, pid, tid, "Connected all trees")
    yield _nccl(rank, pid, tid, "threadThresholds 8/8/64 | 4096/8/64 | 512 | 512")
    yield _nccl(
        rank,
        pid,
        tid,
        f"{channels} coll channels, {channels} collnet channels, 0 nvls channels, "
        f"{channels} p2p channels, {channels} p2p channels per peer",
    )
    yield _nccl(
        rank,
        pid,
        tid,
        f"comm 0x7f{comm:02x}{rank:06x} rank {rank} nranks {ranks} cudaDev {local} nvmlDev {local} "
        f"busId {bus} commId {comm_id} - Init COMPLETE",
    )


def _coll(rank: int, ranks: int, pid: int, tid: int, op: str, count: int, comm: int, opcount: int) -> str:
    return _nccl(
        rank,
        pid,
        tid,
        f"{op}: opCount {opcount:x} sendbuff 0x7f2a{opcount % 9999:04d}00 recvbuff "
        f"0x7f2a{opcount % 9999:04d}00 count {count} datatype 7 op 0 root 0 comm 0x7f{comm:02x}{rank:06x} "
        f"[nranks={ranks}] stream 0x55d{rank:05x}",
    )


def _glog_step(rank: int, pid: int, step: int) -> str:
    loss = 2.0 + ((step * 7919 + rank) % 1000) / 1000
    return (
        f"[rank{rank}]:I1129 03:{(step // 60) % 60:02d}:{step % 60:02d}.{rank:06d} {pid} train.py:212] "
        f"step {step} loss {loss:.4f} lr 3.0e-04 grad_norm 0.{(step * 31 + rank) % 997:03d} "
        f"tokens/s {150000 + (rank * 37 + step) % 5000} mem 61.2GiB\n"
    )


def _timeouts(rank: int, step: int) -> Iterator[str]:
    yield (
        f"[rank{rank}]:[E1129 04:08:01.000{rank:06d} ProcessGroupNCCL.cpp:632] [Rank {rank}] "
        f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={step}, OpType=ALLREDUCE, "
        "NumelIn=26214400, NumelOut=26214400, Timeout(ms)=600000) ran for 600041 milliseconds "
        "before timing out.\n"
    )
    yield (
        f"[rank{rank}]:[E1129 04:08:01.100{rank:06d} ProcessGroupNCCL.cpp:1663] [PG ID 0 PG GUID "
        f"0(default_pg) Rank {rank}]  failure detected by watchdog at work sequence id: {step} "
        f"PG status: last enqueued work: {step}, last completed work: {step - 1}\n"
    )


def _xid_failure(ranks: int, step: int) -> Iterator[str]:
    """An Xid on one host, IB completion errors on its peers, then everyone else's watchdog."""
    bad = ranks // 2 + 3
    yield (
        f"Nov 29 03:58:01 {_host(bad)} kernel: NVRM: Xid (PCI:0000:{(bad % 8 + 1) * 0x10:02x}:00): 79, "
        "pid=4033, name=python3, GPU has fallen off the bus.\n"
    )
    # A few peers see IB errors (three, as in a 64-rank job), however large the job.
    peers = [r for r in range(0, ranks, 16) if r // GPUS_PER_HOST != bad // GPUS_PER_HOST][:3]
    for rank in range(ranks):
        if rank in peers:
            yield "\n"
            yield (
                f"{_host(rank)}:{4000 + rank}:{4071 + rank} [{rank % 8}] transport/net_ib.cc:1700 NCCL WARN "
                f"NET/IB : Got completion from peer 10.1.{bad // 250}.{bad % 250}<47001> with status=12 "
                "opcode=0 len=0 "
                "vendor err 129 (Recv) hca mlx5_0\n"
            )
    for rank in range(ranks):
        if rank != bad:
            yield from _timeouts(rank, step)
    yield "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    yield "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-29_04:08:05\n"
    yield f"  host      : {_host(bad)}\n  rank      : {bad} (local_rank: {bad % 8})\n"
    yield "  exitcode  : -6 (pid: 4033)\n  error_file: <N/A>\n"


def _oom(rank: int) -> Iterator[str]:
    yield f"[rank{rank}]: Traceback (most recent call last):\n"
    yield f'[rank{rank}]:   File "/workspace/train.py", line 212, in <module>\n'
    yield f"[rank{rank}]:     loss = model(batch).loss\n"
    yield (
        f"[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU "
        f"{rank % GPUS_PER_HOST} has a total capacity of 79.11 GiB of which 1.27 GiB is free. Including "
        "non-PyTorch memory, this process has 77.83 GiB memory in use.\n"
    )


# ---- the shapes ----------------------------------------------------------------------------------


def _write_steady(path: Path, size_bytes: int, ranks: int) -> None:
    """Init once, then per-collective INFO lines and step logs for every rank."""
    with path.open("w", encoding="utf-8") as out:
        out.write("NCCL version 2.21.5+cuda12.4\n")
        for rank in range(ranks):
            out.writelines(_comm_init(rank, ranks, 4000 + rank, 4071 + rank, 0, 8))
        step = 1
        while out.tell() < size_bytes:
            for rank in range(ranks):
                out.write(_coll(rank, ranks, 4000 + rank, 4071 + rank, "AllReduce", 26214400, 0, step))
                out.write(_glog_step(rank, 4000 + rank, step))
            step += 1
        out.writelines(_xid_failure(ranks, step))


def _write_setup_flood(path: Path, size_bytes: int, ranks: int) -> None:
    """A new communicator (new comm id, init thread) on every rank every few steps, between the steps."""
    with path.open("w", encoding="utf-8") as out:
        out.write("NCCL version 2.21.5+cuda12.4\n")
        step = comm = 0
        while out.tell() < size_bytes:
            for rank in range(ranks):
                out.writelines(_comm_init(rank, ranks, 4000 + rank, 9000 + comm * 16 + rank % 16, comm, 16))
            for _ in range(4):
                step += 1
                for rank in range(ranks):
                    out.write(_coll(rank, ranks, 4000 + rank, 4071 + rank, "AllReduce", 26214400, 0, step))
                    out.write(_glog_step(rank, 4000 + rank, step))
            comm += 1
        out.writelines(_xid_failure(ranks, step + 1))


def _titan_step(step: int, rank: int) -> str:
    return (
        f"[titan] 2026-11-29 03:{(step // 60) % 60:02d}:{step % 60:02d},{rank % 1000:03d} - root - INFO - "
        f"step: {step:5d}  loss: {2.0 + (step * 7 + rank) % 1000 / 1000:7.4f}  memory: 61.20GiB(77.37%)  "
        f"tps: {15000 + (rank * 37 + step) % 5000:,}  tflops: 400.12  mfu: 40.51%\n"
    )


def _bundle_rank(out: TextIO, rank: int, ranks: int, size_bytes: int, steps: int, oom: int) -> None:
    pid, tid = 41000 + 13 * rank, 41090 + 13 * rank
    out.writelines(_comm_init(rank, ranks, pid, tid, 0, 16))
    for step in range(1, steps + 1):
        for op, count in (("AllGather", 6553600), ("ReduceScatter", 26214400), ("AllReduce", 1)):
            out.write(_coll(rank, ranks, pid, tid, op, count, 0, step * 3))
        out.write(_titan_step(step, rank))
    if rank == oom:
        out.writelines(_oom(rank))
    else:
        out.writelines(_timeouts(rank, steps * 3 + 1))


def _write_bundle(root: Path, size_bytes: int, ranks: int) -> None:
    """torchrun --log-dir trees of `ranks` ranks on 8-GPU hosts, about size_bytes in all."""
    oom = ranks // 3 + 5
    per_rank = size_bytes // ranks
    probe = root / "probe.log"
    with probe.open("w", encoding="utf-8") as out:
        _bundle_rank(out, 0, ranks, 0, 100, oom)
    steps = max(int(100 * per_rank / probe.stat().st_size), 1)
    probe.unlink()
    for rank in range(ranks):
        folder = root / _host(rank) / "attempt_0" / str(rank % GPUS_PER_HOST)
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "stderr.log").open("w", encoding="utf-8") as out:
            _bundle_rank(out, rank, ranks, per_rank, steps, oom)


@dataclass(frozen=True)
class Shape:
    name: str
    size_mb: float
    ranks: int
    write: Callable[[Path, int, int], None]
    folder: bool
    expect_class: str
    expect_ranks: Callable[[int], list[int] | None]  # the culprit ranks expected, None: not checked


SHAPES = {
    "setup-flood": Shape(
        "setup-flood", 400, 512, _write_setup_flood, False, "hardware/gpu-xid", lambda r: [r // 2 + 3]
    ),
    "bundle": Shape("bundle", 1024, 256, _write_bundle, True, "cuda/oom", lambda r: [r // 3 + 5]),
    "steady": Shape("steady", 400, 64, _write_steady, False, "hardware/gpu-xid", lambda r: [r // 2 + 3]),
}


# ---- measuring -----------------------------------------------------------------------------------


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _cpu_of_children() -> float:
    """CPU seconds of the child processes reaped so far (a diagnosis child's workers included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_grep(log: Path, workdir: Path) -> tuple[float, int]:
    keywords = workdir / "keywords.txt"
    keywords.write_text("\n".join(GREP_KEYWORDS) + "\n")
    started = time.perf_counter()
    done = subprocess.run(
        ["grep", "-c", "-F", "-f", str(keywords), *(["-r"] if log.is_dir() else []), str(log)],
        env={**os.environ, "LC_ALL": "C"},
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    count = sum(int(line.rsplit(":", 1)[-1]) for line in done.stdout.split())
    return seconds, count


def child_diagnose(log: str) -> None:
    """Runs in the child: diagnose once, print seconds, peak RSS and the headline as one JSON line."""
    sys.path.insert(0, str(ROOT))
    started = time.perf_counter()
    from matcher.pipeline import diagnose
    from matcher.scanning.catalog import load_catalog
    from matcher.scanning.scan import prefilter_for

    prefilter_for(load_catalog())  # what every run pays once: imports, catalog, Hyperscan database
    startup = time.perf_counter() - started
    diagnosis = diagnose([log]).diagnosis
    seconds = time.perf_counter() - started
    own_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workers_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    headline = {
        "class": diagnosis.primary.class_id,
        "confidence": round(diagnosis.primary.confidence, 3),
        "culprit": diagnosis.culprit.to_json() if diagnosis.culprit else None,
        "bytes": diagnosis.stats.bytes,
        "lines": diagnosis.stats.lines,
    }
    print(
        json.dumps(
            {
                "seconds": seconds,
                "startup_seconds": startup,
                "peak_rss_mb": own_kb / 1024,
                "worker_peak_rss_mb": workers_kb / 1024,
                **headline,
            }
        )
    )


def _child(log: Path, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(log)], capture_output=True, text=True, check=False, env=env
    )
    if done.returncode != 0:
        raise SystemExit(f"diagnosis failed: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def child_environment(workdir: Path) -> dict[str, str]:
    """Children compile bytecode into a private folder (warmed by a first run), as an installed package
    has it; a shell with PYTHONDONTWRITEBYTECODE would otherwise recompile every module on each run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return env


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def measure(
    label: str,
    log: Path,
    workdir: Path,
    repeat: int,
    expect_class: str | None,
    expect_ranks: list[int] | None,
) -> dict[str, Any]:
    env = child_environment(workdir)
    _child(log, env)  # warms bytecode, catalog cache and page cache alike for both sides
    grep_runs: list[float] = []
    runs: list[dict[str, Any]] = []
    grep_count = 0
    grep_cpu: list[float] = []
    diag_cpu: list[float] = []
    for _ in range(repeat):  # interleaved, so that both see the same load on a shared machine
        before = _cpu_of_children()
        seconds, grep_count = time_grep(log, workdir)
        grep_runs.append(seconds)
        between = _cpu_of_children()
        runs.append(_child(log, env))
        grep_cpu.append(between - before)
        diag_cpu.append(_cpu_of_children() - between)
    best = min(runs, key=lambda run: float(run["seconds"]))
    grep_s, diag_s, startup_s = min(grep_runs), float(best["seconds"]), float(best["startup_seconds"])
    peak = max(float(run["peak_rss_mb"]) for run in runs)
    worker_peak = max(float(run["worker_peak_rss_mb"]) for run in runs)
    size = _size(log)
    mb = size / 1024**2
    ratio = grep_s / diag_s
    ratios = sorted(g / float(r["seconds"]) for g, r in zip(grep_runs, runs, strict=True))
    culprit = best["culprit"]
    ok_class = expect_class is None or best["class"] == expect_class
    ok_ranks = expect_ranks is None or (culprit is not None and culprit["ranks"] == expect_ranks)
    print(f"== {label}: {mb:.0f} MB ({size} bytes), best of {repeat} run(s) each")
    print(f"grep -c -F  : {grep_s:6.2f} s  {mb / grep_s:6.0f} MB/s  ({grep_count} matching lines)")
    print(f"diagnosis   : {diag_s:6.2f} s  {mb / diag_s:6.0f} MB/s  (start-up {startup_s:.2f} s included)")
    per_run = ", ".join(f"{r:.2f}" for r in ratios)
    median = ratios[len(ratios) // 2]
    print(
        f"ratio       : {ratio:.2f}  (diagnosis / grep throughput; per run {per_run};"
        f" target >= 0.5 {_verdict(ratio >= 0.5)}, stretch >= 1.0 {_verdict(ratio >= 1.0)})"
    )
    print(f"median ratio: {median:.2f}  (of the runs side by side)")
    cpu_ratio = min(grep_cpu) / min(diag_cpu)
    print(
        f"CPU         : grep {min(grep_cpu):.2f} s, diagnosis {min(diag_cpu):.2f} s in all its processes; "
        f"ratio {cpu_ratio:.2f} (what a machine busy with other work leaves)"
    )
    print(
        f"peak RSS    : {peak:.0f} MB, largest worker {worker_peak:.0f} MB  "
        f"(target < 300 MB {_verdict(max(peak, worker_peak) < 300)})"
    )
    headline = {k: best[k] for k in ("class", "confidence", "culprit")}
    print(f"result      : {json.dumps(headline)}")
    print(f"expected    : {expect_class} culprit ranks {expect_ranks}: {_verdict(ok_class and ok_ranks)}")
    return {
        "ratio": ratio,
        "median": median,
        "cpu_ratio": cpu_ratio,
        "seconds": diag_s,
        "rss": max(peak, worker_peak),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=[*SHAPES, "all"], default="all")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every shape's size (default 1)")
    parser.add_argument("--size-mb", type=float, help="size of the generated input (one shape)")
    parser.add_argument("--ranks", type=int, help="ranks of the simulated job (one shape)")
    parser.add_argument("--keep", type=Path, help="write the inputs into this folder and keep them")
    parser.add_argument("--log", type=Path, help="measure this existing log or folder instead")
    parser.add_argument("--expect", help="with --log: the class the diagnosis must give")
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed runs of each side; the best counts (default 3)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_diagnose(args.child)
        return

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="ncclbot-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    repeat = max(args.repeat, 1)
    try:
        if args.log is not None:
            measure(args.log.name, args.log, workdir, repeat, args.expect, None)
            return
        for shape in SHAPES.values() if args.shape == "all" else [SHAPES[args.shape]]:
            size_mb = args.size_mb or shape.size_mb * args.scale
            ranks = args.ranks or shape.ranks
            log = workdir / shape.name
            if not shape.folder:
                log = log.with_suffix(".log")
            elif not log.exists():
                log.mkdir()
            if not log.exists() or (shape.folder and not any(log.iterdir())):
                started = time.perf_counter()
                shape.write(log, int(size_mb * 1024**2), ranks)
                took = time.perf_counter() - started
                print(f"generated {shape.name}: {ranks} ranks in {took:.1f} s: {log}")
            label = f"{shape.name} ({ranks} ranks)"
            measure(label, log, workdir, repeat, shape.expect_class, shape.expect_ranks(ranks))
            if args.keep is None:
                shutil.rmtree(log) if log.is_dir() else log.unlink()
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
