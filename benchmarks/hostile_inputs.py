"""The hostile inputs of issue 9 part A through the real CLI: wall time, peak RSS and outcome of each,
printed beside a baseline diagnosis (the bundled example) measured in the same run.

    python benchmarks/hostile_inputs.py [--only NAME ...] [--code-root DIR] [--limit-s 120]

Every input is generated into a temp dir; each `ncclbot diagnose --no-store` runs in a child process
(`--code-root` runs another checkout's code, e.g. an export of main, to measure "before"), killed after
`--limit-s`. It prints figures only and asserts nothing: the regression tests are in
tests/matcher/test_flight_recorder_hostile.py, tests/cli/test_hostile_input.py and friends.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "oom-one-rank"

ENTRY: dict[str, Any] = {
    "record_id": 1,
    "pg_id": 0,
    "process_group": ("0", "default_pg"),
    "collective_seq_id": 5,
    "profiling_name": "nccl:all_reduce",
    "input_sizes": [[4096, 1, 5120]],
    "input_dtypes": ["BFloat16"],
    "output_sizes": [[4096, 1, 5120]],
    "state": "scheduled",
    "time_created_ns": 1,
}
PG_CONFIG = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}


def _self_reference(path: Path) -> None:
    entry: dict[str, Any] = dict(ENTRY)
    cycle: list[Any] = [entry]
    entry["input_sizes"] = cycle
    cycle.append(cycle)
    path.write_bytes(pickle.dumps({"version": "2.4", "entries": [entry], "pg_config": PG_CONFIG}, protocol=2))


def _billion_laughs(path: Path) -> None:
    node: list[Any] = ["lol"]
    for _ in range(40):
        node = [node, node]
    entry = {**ENTRY, "input_sizes": node}
    path.write_bytes(pickle.dumps({"version": "2.4", "entries": [entry], "pg_config": PG_CONFIG}, protocol=2))


def _shared_entries_pickle(path: Path) -> None:
    document = {"version": "2.4", "entries": [ENTRY] * 3_000_000, "pg_config": PG_CONFIG}
    path.write_bytes(gzip.compress(pickle.dumps(document, protocol=2), 9))


def _repeated_entries_json(path: Path) -> None:
    """Gzipped JSON that stays under the old 256 MiB cap once decompressed (about 240 MB)."""
    entry = json.dumps(ENTRY)
    with gzip.open(path, "wt", compresslevel=9) as out:
        out.write('{"version": "2.4", "entries": [' + entry)
        for _ in range(880_000 // 1000):
            out.write(("," + entry) * 1000)
        out.write("]}")


def _nul_padded(path: Path) -> None:
    path.write_bytes(b"[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n" + b"\x00" * 4096)


INPUTS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "fr-self-reference": ("nccl_trace_rank_0", _self_reference),
    "fr-billion-laughs": ("nccl_trace_rank_1", _billion_laughs),
    "fr-shared-entries-gz": ("nccl_trace_rank_2.gz", _shared_entries_pickle),
    "fr-json-repeated-gz": ("rank_3.json.gz", _repeated_entries_json),
    "nul-padded-log": ("rank0.log", _nul_padded),
}


def _run(code_root: Path, target: Path, limit_s: float) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code_root), "NCCLBOT_CACHE_DIR": "off"}
    command = [sys.executable, "-m", "bot", "diagnose", "--no-store", str(target)]
    started = time.perf_counter()
    child = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=code_root
    )
    status: int | None = None
    rss_kb = 0
    while status is None:
        pid, raw_status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            status, rss_kb = os.waitstatus_to_exitcode(raw_status), usage.ru_maxrss
            break
        if time.perf_counter() - started > limit_s:
            child.kill()
            _, raw_status, usage = os.wait4(child.pid, 0)
            status, rss_kb = None, usage.ru_maxrss
            break
        time.sleep(0.02)
    stderr = child.stderr.read().decode(errors="replace").strip() if child.stderr else ""
    child.returncode = 0  # reaped by wait4 above
    return {
        "seconds": time.perf_counter() - started,
        "rss_mb": rss_kb / 1024,
        "exit": "killed (over limit)" if status is None else status,
        "message": stderr.splitlines()[-1][:110] if stderr else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="*", choices=sorted(INPUTS), help="run only these inputs")
    parser.add_argument(
        "--code-root", type=Path, default=ROOT, help="checkout whose code runs (default: this)"
    )
    parser.add_argument("--limit-s", type=float, default=120.0, help="kill a run after this many seconds")
    parser.add_argument("--make", nargs=2, metavar=("NAME", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make:  # in a child of its own: a forked child's peak RSS would include the generator's memory
        INPUTS[args.make[0]][1](Path(args.make[1]))
        return

    baseline = _run(args.code_root, EXAMPLE, args.limit_s)
    print(f"baseline (bundled example): {baseline['seconds']:.2f} s, {baseline['rss_mb']:.0f} MB peak RSS")
    with tempfile.TemporaryDirectory(prefix="ncclbot-hostile-") as tmp:
        for name in args.only or sorted(INPUTS):
            target = Path(tmp) / INPUTS[name][0]
            subprocess.run([sys.executable, __file__, "--make", name, str(target)], check=True)
            figures = _run(args.code_root, target, args.limit_s)
            print(
                f"{name:<22} {target.stat().st_size:>9,} B  {figures['seconds']:7.2f} s "
                f"({figures['seconds'] / baseline['seconds']:5.1f}x)  {figures['rss_mb']:7.0f} MB "
                f"({figures['rss_mb'] / baseline['rss_mb']:5.1f}x)  exit {figures['exit']}  "
                f"{figures['message']}"
            )
            target.unlink()


if __name__ == "__main__":
    main()
