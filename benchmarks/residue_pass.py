"""The residue pass (bot.services.residue.collect) against the diagnosis of the same unknown log: its
cost must stay bounded whatever the size of the log.

    python benchmarks/residue_pass.py [--size-mb 400] [--repeat 3]

Generates a plain and a gzip-compressed log of `--size-mb` of healthy training output with unrecognised
error lines at the start and the end (an `unknown` diagnosis), then times, in this process and
interleaved, best of `--repeat`: the whole diagnosis (`matcher.pipeline.diagnose`) and the residue pass
(`candidate_lines`) on each. Prints the times, their ratio and the residue pass's peak of Python
allocations (tracemalloc). It prints figures only; it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.services.residue.collect import RecognisedLines, candidate_lines
from matcher.pipeline import diagnose
from matcher.scanning.catalog import load_catalog

STEP = "[rank{rank}]: step {step} loss {loss:.3f} lr 3.0e-4 tokens/s 182734 mem 71.2 GiB\n"
START = "[rank0]: RuntimeError: PMIx server died before the job finished (code 137)\n"
END = "[rank3]: fatal: lost contact with the burst buffer bb-{n:02d} after 30 s\n"


def write_log(path: Path, size_mb: int) -> None:
    block = "".join(STEP.format(rank=i % 8, step=i, loss=2 + i / 1e5) for i in range(20_000)).encode()
    with path.open("wb") as file:
        file.write(START.encode())
        while file.tell() < size_mb * 1024**2:
            file.write(block)
        for n in range(5):
            file.write(END.format(n=n).encode())


def best(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    recognised = RecognisedLines(load_catalog())
    folder = Path(tempfile.mkdtemp(prefix="ncclbot-residue-bench-"))
    try:
        plain = folder / "rank0.log"
        write_log(plain, args.size_mb)
        compressed = folder / "rank0.log.gz"
        with plain.open("rb") as source, gzip.open(compressed, "wb", compresslevel=1) as target:
            shutil.copyfileobj(source, target, 1024**2)
        for label, path in (("plain", plain), ("gzip", compressed)):
            diagnosis = best(lambda p=path: diagnose([str(p)]), args.repeat)
            residue = best(lambda p=path: candidate_lines([str(p)], recognised), args.repeat)
            tracemalloc.start()
            found = candidate_lines([str(path)], recognised)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(
                f"{label:>5} {args.size_mb} MB: diagnosis {diagnosis:.2f} s, residue pass {residue:.3f} s "
                f"({residue / diagnosis:.1%} of it), {len(found)} distinct lines, "
                f"peak allocations {peak / 1024**2:.1f} MB"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
