"""Matcher throughput against `grep -c -F` on the same large multi-rank log, plus the diagnosis's peak RSS.

    python benchmarks/matcher_throughput.py [--size-mb 400] [--ranks 64] [--keep DIR] [--repeat 3]
    python benchmarks/matcher_throughput.py --log FILE   # measure an existing (kept) log again

Generates (streamed into a temp dir, never held in memory) an NCCL_DEBUG=INFO-style log of a many-rank job:
NCCL init lines for every rank, then training steps with per-collective INFO lines and step logs, and a
failure near the end (an Xid on one host, IB completion errors, then watchdog timeouts on every rank and
torchrun's failure block). Then, in the same run, times `LC_ALL=C grep -c -F -f <keywords>` on the file and
the whole diagnosis (`matcher.pipeline.diagnose`, start-up included) in a child process, interleaved and
best of `--repeat`, and prints both throughputs, their ratio (target >= 0.5, stretch >= 1.0) and the
child's peak RSS (target < 300 MB). It prints figures only; it asserts nothing about time.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GREP_KEYWORDS = ["NCCL WARN", "Watchdog caught collective operation timeout", "NVRM: Xid", "out of memory"]
GPUS_PER_HOST = 8


def _host(rank: int) -> str:
    return f"gpu-node-{rank // GPUS_PER_HOST:03d}"


def _nccl(rank: int, pid: int, text: str) -> str:
    return f"{_host(rank)}:{pid}:{pid + 71} [{rank % GPUS_PER_HOST}] NCCL INFO {text}\n"


def _init_lines(ranks: int) -> Iterator[str]:
    yield "NCCL version 2.21.5+cuda12.4\n"
    for rank in range(ranks):
        pid = 4000 + rank
        local = rank % GPUS_PER_HOST
        yield _nccl(rank, pid, f"Bootstrap : Using ib0:10.1.{rank // 250}.{rank % 250}<0>")
        yield _nccl(rank, pid, "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")
        yield _nccl(rank, pid, f"NET/IB : Using [0]mlx5_{local}:1/IB [RO]; OOB ib0:10.1.0.{rank % 250}<0>")
        yield _nccl(rank, pid, "Using network IB")
        yield _nccl(
            rank,
            pid,
            f"ncclCommInitRank comm 0x7f{rank:06x} rank {rank} nranks {ranks} cudaDev {local} "
            f"nvmlDev {local} busId {(local + 1) * 0x10:x}000 commId 0x5c1e2f3a4b6d7e80 - Init START",
        )
        for channel in range(8):
            peer = (rank + 1) % ranks
            yield _nccl(
                rank,
                pid,
                f"Channel {channel:02d}/0 : {rank}[{local}] -> {peer}[{peer % GPUS_PER_HOST}] "
                f"[send] via NET/IB/{local}/GDRDMA",
            )
        yield _nccl(rank, pid, "Connected all rings")
        yield _nccl(rank, pid, "Connected all trees")
        yield _nccl(
            rank,
            pid,
            f"comm 0x7f{rank:06x} rank {rank} nranks {ranks} cudaDev {local} "
            f"busId {(local + 1) * 0x10:x}000 commId 0x5c1e2f3a4b6d7e80 - Init COMPLETE",
        )


def _step_lines(ranks: int, step: int) -> Iterator[str]:
    for rank in range(ranks):
        pid = 4000 + rank
        yield _nccl(
            rank,
            pid,
            f"AllReduce: opCount {step:x} sendbuff 0x7f2a{step % 9999:04d}00 recvbuff "
            f"0x7f2a{step % 9999:04d}00 count 26214400 datatype 7 op 0 root 0 comm 0x7f{rank:06x} "
            f"[nranks={ranks}] stream 0x55d{rank:05x}",
        )
        loss = 2.0 + ((step * 7919 + rank) % 1000) / 1000
        yield (
            f"[rank{rank}]:I1129 03:{(step // 60) % 60:02d}:{step % 60:02d}.{rank:06d} {pid} train.py:212] "
            f"step {step} loss {loss:.4f} lr 3.0e-04 grad_norm 0.{(step * 31 + rank) % 997:03d} "
            f"tokens/s {150000 + (rank * 37 + step) % 5000} mem 61.2GiB\n"
        )


def _failure_lines(ranks: int, step: int) -> Iterator[str]:
    bad = ranks // 2 + 3
    yield (
        f"Nov 29 03:58:01 {_host(bad)} kernel: NVRM: Xid (PCI:0000:{(bad % 8 + 1) * 0x10:02x}:00): 79, "
        "pid=4033, name=python3, GPU has fallen off the bus.\n"
    )
    for rank in range(ranks):
        if rank // GPUS_PER_HOST == bad // GPUS_PER_HOST:
            continue
        if rank % 16 == 0:
            yield "\n"
            yield (
                f"{_host(rank)}:{4000 + rank}:{4071 + rank} [{rank % 8}] transport/net_ib.cc:1700 NCCL WARN "
                f"NET/IB : Got completion from peer 10.1.0.{bad}<47001> with status=12 opcode=0 len=0 "
                "vendor err 129 (Recv) hca mlx5_0\n"
            )
    for rank in range(ranks):
        if rank == bad:
            continue
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
    yield "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    yield "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-29_04:08:05\n"
    yield f"  host      : {_host(bad)}\n  rank      : {bad} (local_rank: {bad % 8})\n"
    yield "  exitcode  : -6 (pid: 4033)\n  error_file: <N/A>\n"


def generate(path: Path, size_bytes: int, ranks: int) -> int:
    """Write the log; returns its size. Memory stays at one step's worth of lines."""
    written = 0
    step = 1
    with path.open("w", encoding="utf-8") as out:
        for line in _init_lines(ranks):
            written += out.write(line)
        while written < size_bytes:
            chunk = "".join(_step_lines(ranks, step))
            written += out.write(chunk)
            step += 1
        for line in _failure_lines(ranks, step):
            written += out.write(line)
    return path.stat().st_size


def time_grep(log: Path, workdir: Path) -> tuple[float, str]:
    keywords = workdir / "keywords.txt"
    keywords.write_text("\n".join(GREP_KEYWORDS) + "\n")
    started = time.perf_counter()
    done = subprocess.run(
        ["grep", "-c", "-F", "-f", str(keywords), str(log)],
        env={**os.environ, "LC_ALL": "C"},
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - started, done.stdout.strip()


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
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    headline = {
        "class": diagnosis.primary.class_id,
        "confidence": round(diagnosis.primary.confidence, 3),
        "culprit": diagnosis.culprit.to_json() if diagnosis.culprit else None,
    }
    print(
        json.dumps(
            {"seconds": seconds, "startup_seconds": startup, "peak_rss_mb": peak_kb / 1024, **headline}
        )
    )


def child_breakdown(log: str) -> None:
    """Runs in the child: where the scan's time goes, reading blocks alone and the prefilter alone over
    those blocks, one after the other (the rest of the diagnosis is candidate lines and analysis)."""
    sys.path.insert(0, str(ROOT))
    from matcher.reading.read import ReadLimits, iter_blocks, iter_sources
    from matcher.scanning.catalog import load_catalog
    from matcher.scanning.scan import prefilter_for

    limits = ReadLimits()
    prefilter = prefilter_for(load_catalog())
    read_s = prefilter_s = 0.0
    for source in iter_sources([log], limits):
        blocks = iter_blocks(source, limits)
        while True:
            started = time.perf_counter()
            block = next(blocks, None)
            read_s += time.perf_counter() - started
            if block is None:
                break
            started = time.perf_counter()
            prefilter.lines(block.data)
            prefilter_s += time.perf_counter() - started
    print(json.dumps({"read_seconds": read_s, "prefilter_seconds": prefilter_s}))


def _child(mode: str, log: Path, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, mode, str(log)], capture_output=True, text=True, check=False, env=env
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


def measure(log: Path, workdir: Path, repeat: int) -> None:
    env = child_environment(workdir)
    _child("--breakdown", log, env)  # warms bytecode, catalog cache and page cache alike for both sides
    grep_runs: list[float] = []
    runs: list[dict[str, Any]] = []
    for _ in range(repeat):  # interleaved, so that both see the same load on a shared machine
        seconds, grep_count = time_grep(log, workdir)
        grep_runs.append(seconds)
        runs.append(_child("--child", log, env))
    breakdown = _child("--breakdown", log, env)
    best = min(runs, key=lambda run: float(run["seconds"]))
    grep_s, diag_s, startup_s = min(grep_runs), float(best["seconds"]), float(best["startup_seconds"])
    peak = max(float(run["peak_rss_mb"]) for run in runs)
    mb = log.stat().st_size / 1024**2
    ratio = grep_s / diag_s
    print(f"input       : {mb:.0f} MB ({log.stat().st_size} bytes), best of {repeat} run(s) each")
    print(f"grep -c -F  : {grep_s:6.2f} s  {mb / grep_s:6.0f} MB/s  ({grep_count} matching lines)")
    print(f"diagnosis   : {diag_s:6.2f} s  {mb / diag_s:6.0f} MB/s  (start-up included)")
    print(
        f"ratio       : {ratio:.2f}  (diagnosis / grep throughput; target >= 0.5 {_verdict(ratio >= 0.5)}, "
        f"stretch >= 1.0 {_verdict(ratio >= 1.0)})"
    )
    print(f"peak RSS    : {peak:.0f} MB  (target < 300 MB {_verdict(peak < 300)})")
    warm = diag_s - startup_s
    read_s, prefilter_s = float(breakdown["read_seconds"]), float(breakdown["prefilter_seconds"])
    print(
        f"  start-up {startup_s:.2f} s (imports, catalog, Hyperscan database); the rest "
        f"{mb / warm:.0f} MB/s, ratio {grep_s / warm:.2f}"
    )
    print(
        f"  measured alone, serially: reading blocks {read_s:.2f} s ({mb / read_s:.0f} MB/s), "
        f"prefilter {prefilter_s:.2f} s ({mb / prefilter_s:.0f} MB/s)"
    )
    headline = {k: v for k, v in best.items() if k not in ("seconds", "startup_seconds", "peak_rss_mb")}
    print(f"result      : {json.dumps(headline)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--size-mb", type=float, default=400.0, help="size of the generated log (default 400)"
    )
    parser.add_argument("--ranks", type=int, default=64, help="ranks in the simulated job (default 64)")
    parser.add_argument("--keep", type=Path, help="write the log into this folder and keep it")
    parser.add_argument(
        "--log", type=Path, help="measure this existing log instead of generating one (e.g. a kept one)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed runs of each side; the best counts (default 3)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--breakdown", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_diagnose(args.child)
        return
    if args.breakdown:
        child_breakdown(args.breakdown)
        return

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="ncclbot-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        log = args.log or workdir / "job-8812.log"
        if args.log is None:
            started = time.perf_counter()
            size = generate(log, int(args.size_mb * 1024**2), args.ranks)
            print(
                f"generated {size / 1024**2:.0f} MB, {args.ranks} ranks "
                f"in {time.perf_counter() - started:.1f} s: {log}"
            )
        measure(log, workdir, max(args.repeat, 1))
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
