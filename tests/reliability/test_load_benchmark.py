"""`benchmarks/server_load.py` itself, with the small counts CI can afford: every scenario runs to the
end against a real `ncclbot serve` and the fake Slack, and reports nothing lost or posted twice. (The
figures in the README come from the full counts; this keeps the script that makes them working.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "server_load.py"


def test_the_load_benchmark_runs_every_scenario_and_loses_nothing() -> None:
    counts = ["--commands", "6", "--uploads", "3", "--upload-mb", "1", "--events", "6"]
    counts += ["--webhooks", "12", "--webhook-clients", "4"]
    run = subprocess.run(
        [sys.executable, str(SCRIPT), *counts], capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = {line.split(":", 1)[0]: line for line in run.stdout.splitlines() if ":" in line}
    assert {"commands", "uploads", "crash", "webhooks"} <= set(lines), run.stdout
    assert "6/6 acknowledged (200), 0 over 3 s" in lines["commands"]
    assert re.search(r"askers answered other than once: 0$", lines["crash"]), lines["crash"]
    assert "12/12 accepted (202)" in lines["webhooks"]
    assert lines["webhooks"].endswith("jobs posted other than once: 0"), lines["webhooks"]
