"""Run the real `ncclbot` entry point in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "oom-one-rank"


def run_cli(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=full_env,
        timeout=120,
        check=False,
    )


def run_json(*args: str, **kwargs: Any) -> dict[str, Any]:
    result = run_cli(*args, "--json", **kwargs)
    assert result.returncode == 0, result.stderr.decode()
    document: dict[str, Any] = json.loads(result.stdout)
    return document
