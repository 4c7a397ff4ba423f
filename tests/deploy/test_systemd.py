"""deploy/systemd/ncclbot.service: systemd itself finds nothing wrong with it, rates its hardening
"OK", and the settings it sets are ones the bot accepts. (No systemd runs here to start it.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import need_service
from tests.server.helpers import clean_environment

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "ncclbot.service"
NCCLBOT = Path(sys.executable).with_name("ncclbot")


@pytest.fixture
def unit(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at this checkout's ncclbot (verify wants an existing binary)."""
    need_service(bool(shutil.which("systemd-analyze")), "systemd-analyze (package systemd)")
    copy = tmp_path / "ncclbot.service"
    copy.write_text(UNIT.read_text().replace("/opt/ncclbot/bin/ncclbot", str(NCCLBOT)))
    return copy


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["systemd-analyze", *args], capture_output=True, text=True, timeout=60)


def test_systemd_verify_reports_nothing(unit: Path) -> None:
    result = analyze("verify", str(unit))
    # Unknown or misspelt keys are only warnings (exit 0): any output at all is a defect.
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_hardening_is_rated_ok_by_systemd(unit: Path) -> None:
    result = analyze("security", "--offline=yes", str(unit))
    match = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", result.stdout)
    assert match is not None, result.stdout + result.stderr
    assert float(match.group(1)) <= 2.0, match.group(0)


def test_the_units_settings_are_valid_for_the_bot() -> None:
    environment = dict(re.findall(r"^Environment=(\w+)=(.*)$", UNIT.read_text(), re.MULTILINE))
    assert {"NCCLBOT_DATABASE_URL", "NCCLBOT_CACHE_DIR"} <= set(environment)
    result = subprocess.run(
        [sys.executable, "-m", "bot", "config", "check", "--json"],
        cwd=ROOT,
        env=clean_environment(environment),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "EnvironmentFile=/etc/ncclbot/ncclbot.env" in UNIT.read_text()
    assert "RestartPreventExitStatus=2" in UNIT.read_text()  # invalid settings: do not restart-loop
