"""The coverage-guided harness runs: each target for a short fixed number of inputs in CI (a longer hunt
is `python tests/fuzz/fuzz.py TARGET -max_total_time=600`, see README "Reliability"). It fails on any
crash, hang or memory blow-up libFuzzer reports, leaving the input beside it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import need_service

HARNESS = Path(__file__).with_name("fuzz.py")
RUNS = {
    "reader": 20_000,
    "flight_recorder": 20_000,
    "matcher": 400,
    "slack_payload": 400,
    "webhook_payload": 5_000,
}


@pytest.mark.parametrize("target", sorted(RUNS))
def test_the_harness_finds_nothing_in_a_short_run(target: str, tmp_path: Path) -> None:
    need_service(importlib.util.find_spec("atheris") is not None, "atheris (a Linux wheel) is not installed")
    result = subprocess.run(
        [sys.executable, str(HARNESS), target, f"-runs={RUNS[target]}", "-timeout=30", "-rss_limit_mb=2048"],
        cwd=tmp_path,
        capture_output=True,
        timeout=600,
    )
    output = result.stderr.decode(errors="replace")
    assert result.returncode == 0, output[-4000:]
    assert f"Done {RUNS[target]} runs" in output
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("oom-*"))
