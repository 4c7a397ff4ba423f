"""Running the probe for real (Gloo on CPU) from the tests, small and quick on 2 shared cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from probes.result import ProbeResult

ROOT = Path(__file__).resolve().parents[2]
# Small sizes and few iterations: the point is the path and the arithmetic, not CPU bandwidth.
SMALL_SIZES = "8,1K,64K,256K"


def probe_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path), OMP_NUM_THREADS="1")
    env.pop("NCCLBOT_PROBE_FAULT", None)
    env.update(extra)
    return env


def run_probe(
    tmp_path: Path, *args: str, timeout: float = 90, **env: str
) -> tuple[ProbeResult, subprocess.CompletedProcess[str]]:
    """`python -m probes.allreduce --json ARGS`; returns the parsed result and the process."""
    done = subprocess.run(
        [sys.executable, "-m", "probes.allreduce", "--json", *args],
        cwd=ROOT,
        env=probe_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, (
        f"no JSON on stdout; rc={done.returncode}\nstdout={done.stdout}\nstderr={done.stderr[-3000:]}"
    )
    data: dict[str, Any] = json.loads(lines[-1])
    return ProbeResult.from_dict(data), done


def processes_with(marker: str) -> list[int]:
    """PIDs of live processes whose environment carries NCCLBOT_TEST_MARKER=marker."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"NCCLBOT_TEST_MARKER={marker}".encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found
