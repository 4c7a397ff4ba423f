"""Exercise the probe's NCCL path on a GPU machine in under 3 minutes, and compare its busbw with
nccl-tests' `all_reduce_perf` when that is installed.

    python benchmarks/gpu_probe.py [--out DIR] [--max-bytes 1G] [--nproc N]

Runs `python -m probes.allreduce --json --backend nccl` on all local GPUs (8 B..1 GiB by default),
then, if `all_reduce_perf` is on PATH (or in $NCCL_TESTS_DIR/build), the same sweep with nccl-tests, and
prints both busbw columns side by side. Writes probe.json, nccl-tests.txt and comparison.json to --out
(default: $OUT, else the current directory). Exit status: 0 when the probe ran on NCCL and its
verdict is not failed (and, with nccl-tests, the probe's busbw at the largest common size is at
least 80% of nccl-tests'), 1 otherwise, 2 without GPUs. With one GPU the allreduce moves nothing
between devices (busbw is 0 by definition): the run still checks NCCL init, correctness and timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE_TIMEOUT_S = 110  # with nccl-tests below, the whole script stays under 3 minutes
NCCL_TESTS_TIMEOUT_S = 50
MIN_RATIO = 0.8


def gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def nccl_tests_binary() -> str | None:
    found = shutil.which("all_reduce_perf")
    if found:
        return found
    candidate = Path(os.environ.get("NCCL_TESTS_DIR", "/opt/nccl-tests")) / "build" / "all_reduce_perf"
    return str(candidate) if candidate.is_file() else None


def parse_nccl_tests(text: str) -> dict[int, float]:
    """Size -> in-place busbw (GB/s) from all_reduce_perf's table (the probe reduces in place too)."""
    table: dict[int, float] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 13 and fields[0].isdigit():
            try:
                table[int(fields[0])] = float(fields[11])
            except ValueError:
                continue
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--max-bytes", default="1G")
    parser.add_argument("--nproc", type=int)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpus = args.nproc or gpu_count()
    if gpus == 0:
        print("gpu_probe: no GPU found (nvidia-smi -L)", file=sys.stderr)
        return 2

    started = time.monotonic()
    probe = subprocess.run(
        [
            sys.executable,
            "-m",
            "probes.allreduce",
            "--json",
            "--backend",
            "nccl",
            "--nproc",
            str(gpus),
            "--max-bytes",
            args.max_bytes,
            "--deadline",
            str(PROBE_TIMEOUT_S - 20),
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    (out / "probe.stderr.txt").write_text(probe.stderr)
    lines = [line for line in probe.stdout.splitlines() if line.startswith("{")]
    if not lines:
        print(f"gpu_probe: the probe printed no result (rc {probe.returncode}); see probe.stderr.txt")
        return 1
    result = json.loads(lines[-1])
    (out / "probe.json").write_text(json.dumps(result, indent=2))
    print(f"probe: {result['verdict']} on {result['backend']}, {result['world_size']} ranks, "
          f"{time.monotonic() - started:.1f} s")  # fmt: skip
    for reason in result["reasons"]:
        print(f"  - {reason}")
    ours = {row["bytes"]: row["busbw_gbps"] for row in result["results"]}

    ok = result["backend"] == "nccl" and result["verdict"] != "failed"
    comparison: dict[str, object] = {"probe_busbw": ours}
    binary = nccl_tests_binary()
    if binary is None:
        print("nccl-tests: all_reduce_perf not found; busbw not compared")
    else:
        ref = subprocess.run(
            [binary, "-b", "8", "-e", args.max_bytes, "-f", "2", "-g", str(gpus)],
            capture_output=True,
            text=True,
            timeout=NCCL_TESTS_TIMEOUT_S,
            check=False,
        )
        (out / "nccl-tests.txt").write_text(ref.stdout + ref.stderr)
        theirs = parse_nccl_tests(ref.stdout)
        common = sorted(set(ours) & set(theirs))
        print(f"{'size':>12} {'probe busbw':>12} {'nccl-tests':>12}")
        for size in common:
            print(f"{size:>12} {ours[size]:>12.2f} {theirs[size]:>12.2f}")
        if common and theirs[common[-1]] > 0:
            ratio = ours[common[-1]] / theirs[common[-1]]
            print(f"largest common size {common[-1]} B: probe / nccl-tests = {ratio:.2f}")
            comparison.update(nccl_tests_busbw=theirs, ratio_at_largest=ratio)
            ok = ok and ratio >= MIN_RATIO
    (out / "comparison.json").write_text(json.dumps(comparison, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
