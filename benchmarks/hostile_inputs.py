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
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixtures.hostile_files import (  # noqa: E402
    FR_ENTRY,
    fr_billion_laughs,
    fr_self_reference,
    fr_shared_entries,
    repeat_central_directory,
)

EXAMPLE = ROOT / "examples" / "oom-one-rank"


def _self_reference(path: Path) -> None:
    path.write_bytes(pickle.dumps(fr_self_reference(), protocol=2))


def _billion_laughs(path: Path) -> None:
    path.write_bytes(pickle.dumps(fr_billion_laughs(), protocol=2))


def _shared_entries_pickle(path: Path) -> None:
    path.write_bytes(gzip.compress(pickle.dumps(fr_shared_entries(), protocol=2), 9))


def _repeated_entries_json(path: Path) -> None:
    """Gzipped JSON that stays under the old 256 MiB cap once decompressed (about 240 MB)."""
    entry = json.dumps(FR_ENTRY)
    with gzip.open(path, "wt", compresslevel=9) as out:
        out.write('{"version": "2.4", "entries": [' + entry)
        for _ in range(880_000 // 1000):
            out.write(("," + entry) * 1000)
        out.write("]}")


def _nul_padded(path: Path) -> None:
    path.write_bytes(b"[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n" + b"\x00" * 4096)


def _tar_cut_inside_member(path: Path) -> None:
    """An 8 MB rank log in a tar, the tar cut 60% of the way into it (a partial upload)."""
    data = b"".join(b"step %07d loss 2.%04d\n" % (i, i % 9973) for i in range(400_000))
    data += b"[rank3]: torch.OutOfMemoryError: CUDA out of memory.\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("attempt_0/3/stderr.log")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue()[: 512 + len(data) * 6 // 10])


def _zip_duplicate_entries(path: Path) -> None:
    """One member of 63 MiB (under the old 64 MiB ratio floor) listed 1,000 times in the central directory."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("rank0.log", b"\n" * (63 * 1024**2))
    path.write_bytes(repeat_central_directory(buffer.getvalue(), 1000))  # the same name each time


def _tar_many_members(path: Path, compress: bool) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for index in range(100_001):
            data = b"step %d\n" % index
            info = tarfile.TarInfo(f"r/{index}.log")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue(), 1) if compress else buffer.getvalue())


def _hostile_regex_lines_zip(path: Path) -> None:
    """20 members of 64 KB lines built from the keywords of patterns that used to backtrack on them."""
    fillers = [
        b"exitcode" + b"\t" * 65_000,
        b"pytorch version" + b"\t" * 65_000,
        b"considered dead" + b"0" * 65_000,
    ]
    fillers += [b"    if dist.ge" * 4600, b"oom-kill:a " * 5900, b"ibv_open_devicea" * 4000]
    body = b"".join(line[:65_536] + b"\n" for line in fillers * 20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for index in range(20):
            noise = os.urandom(24_000).hex().encode()  # incompressible: keeps the zip under 250:1
            archive.writestr(f"rank{index}.log", body + noise + b"\n")


def _folder_many_files(path: Path) -> None:
    path.mkdir()
    for index in range(100_001):
        (path / f"rank{index}.log").write_bytes(b"step 1\n")


INPUTS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "tar-cut-inside-member": ("bundle.tar", _tar_cut_inside_member),
    "zip-duplicate-entries": ("bundle.zip", _zip_duplicate_entries),
    "tar-100k-members": ("bundle.tar", lambda path: _tar_many_members(path, compress=False)),
    "tgz-100k-members": ("bundle.tar.gz", lambda path: _tar_many_members(path, compress=True)),
    "folder-100k-files": ("logs", _folder_many_files),
    "zip-regex-64kb-lines": ("hostile.zip", _hostile_regex_lines_zip),
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
    # stderr goes to a file: a child writing more than a pipe holds (a thousand warnings) would block
    # while this loop only polls for its exit.
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=errors, cwd=code_root)
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
        child.returncode = 0  # reaped by wait4 above
        errors.seek(0)
        stderr = errors.read().decode(errors="replace").strip()
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
            size = (
                sum(f.stat().st_size for f in target.rglob("*")) if target.is_dir() else target.stat().st_size
            )
            print(
                f"{name:<22} {size:>9,} B  {figures['seconds']:7.2f} s "
                f"({figures['seconds'] / baseline['seconds']:5.1f}x)  {figures['rss_mb']:7.0f} MB "
                f"({figures['rss_mb'] / baseline['rss_mb']:5.1f}x)  exit {figures['exit']}  "
                f"{figures['message']}"
            )
            shutil.rmtree(target) if target.is_dir() else target.unlink()


if __name__ == "__main__":
    main()
