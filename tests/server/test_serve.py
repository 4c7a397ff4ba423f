"""`ncclbot serve` as a real process: it says where it listens, answers /healthz and stops on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

from tests.server.helpers import running_server


def test_serve_answers_healthz_and_stops_cleanly_on_sigterm() -> None:
    with running_server() as server:
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=5) as response:
            assert response.status == 200
            assert json.load(response) == {"status": "ok"}
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=15) == 0


def test_invalid_settings_are_refused_with_one_line_each() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot", "serve", "--port", "0"],
        env={"PATH": "/usr/bin:/bin", "NCCLBOT_PORT": "http", "NCCLBOT_DIAGNOSIS_CONCURRENCY": "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    problems = [line for line in result.stderr.splitlines() if line.startswith("ncclbot: setting ")]
    assert len(problems) == 2, result.stderr
    assert "Traceback" not in result.stderr
