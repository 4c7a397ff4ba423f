"""Matcher throughput against `grep -c -F` on the same large multi-rank log, plus the diagnosis's peak RSS.

    python benchmarks/matcher_throughput.py [--size-mb 400] [--ranks 64] [--keep DIR]

Generates (streamed into a temp dir, never held in memory) an NCCL_DEBUG=INFO-style log of a many-rank job:
NCCL init lines for every rank, then training steps with per-collective INFO lines and step logs, and a
failure near the end (an Xid on one host, IB completion errors, then watchdog timeouts on every rank and
torchrun's failure block). Then, in the same run, times `LC_ALL=C grep -c -F -f <keywords>` on the file and
the diagnosis (`matcher.pipeline.diagnose`, or the bare scan where the pipeline is absent) in a child
process, and prints both throughputs, their ratio (target >= 0.5, stretch >= 1.0) and the child's peak RSS
(target < 300 MB). It prints figures only; it asserts nothing about time.
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
    from matcher.catalog import load_catalog
    from matcher.scan import prefilter_for

    prefilter_for(load_catalog())  # what every run pays once: imports, catalog, Hyperscan database
    startup = time.perf_counter() - started
    try:
        from matcher.pipeline import diagnose

        diagnosis = diagnose([log]).diagnosis
        headline = {
            "class": diagnosis.primary.class_id,
            "confidence": round(diagnosis.primary.confidence, 3),
            "culprit": diagnosis.culprit.to_json() if diagnosis.culprit else None,
        }
    except ImportError:
        from matcher.catalog import load_catalog
        from matcher.read import ReadLimits, iter_sources
        from matcher.scan import scan

        limits = ReadLimits()
        result = scan(iter_sources([log], limits), load_catalog(), limits)
        headline = {"observations": len(result.observations)}
    seconds = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    breakdown = {"startup_seconds": startup, **_breakdown(log)}
    print(json.dumps({"seconds": seconds, "peak_rss_mb": peak_kb / 1024, **headline, **breakdown}))


def _breakdown(log: str) -> dict[str, float]:
    """Where the time goes, measured after the timed run: reading blocks alone, and the prefilter alone
    over those blocks (the rest of the diagnosis is candidate lines, analysis and start-up)."""
    from matcher.catalog import load_catalog
    from matcher.read import ReadLimits, iter_blocks, iter_sources
    from matcher.scan import prefilter_for

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
    return {"read_seconds": read_s, "prefilter_seconds": prefilter_s}


def time_diagnosis(log: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(log)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"diagnosis failed: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--size-mb", type=float, default=400.0, help="size of the generated log (default 400)"
    )
    parser.add_argument("--ranks", type=int, default=64, help="ranks in the simulated job (default 64)")
    parser.add_argument("--keep", type=Path, help="write the log into this folder and keep it")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_diagnose(args.child)
        return

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="ncclbot-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        log = workdir / "job-8812.log"
        started = time.perf_counter()
        size = generate(log, int(args.size_mb * 1024**2), args.ranks)
        print(
            f"generated {size / 1024**2:.0f} MB, {args.ranks} ranks "
            f"in {time.perf_counter() - started:.1f} s: {log}"
        )
        grep_seconds, grep_count = time_grep(log, workdir)
        diagnosis = time_diagnosis(log)
        diag_seconds = float(diagnosis.pop("seconds"))  # type: ignore[arg-type]
        peak = float(diagnosis.pop("peak_rss_mb"))  # type: ignore[arg-type]
        mb = size / 1024**2
        print(
            f"grep -c -F  : {grep_seconds:6.2f} s  {mb / grep_seconds:8.0f} MB/s  "
            f"({grep_count} matching lines)"
        )
        print(f"diagnosis   : {diag_seconds:6.2f} s  {mb / diag_seconds:8.0f} MB/s  peak RSS {peak:.0f} MB")
        print(
            f"ratio (diagnosis / grep throughput): {grep_seconds / diag_seconds:.2f}  "
            "(target >= 0.5, stretch >= 1.0)"
        )
        startup_s = float(diagnosis.pop("startup_seconds"))  # type: ignore[arg-type]
        read_s = float(diagnosis.pop("read_seconds"))  # type: ignore[arg-type]
        prefilter_s = float(diagnosis.pop("prefilter_seconds"))  # type: ignore[arg-type]
        warm = diag_seconds - startup_s
        print(
            f"  start-up {startup_s:.2f} s (imports, catalog, Hyperscan database); without it "
            f"{mb / warm:.0f} MB/s, ratio {grep_seconds / warm:.2f}"
        )
        print(
            f"  measured alone, serially: reading blocks {read_s:.2f} s ({mb / read_s:.0f} MB/s), "
            f"prefilter {prefilter_s:.2f} s ({mb / prefilter_s:.0f} MB/s)"
        )
        print(f"result      : {json.dumps(diagnosis)}")
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
