"""`ncclbot runbook`: text, JSON, values from --set, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bot.cli import main
from matcher.taxonomy import CLASSES
from tests.conftest import ROOT


def test_json_output_is_filled_with_the_given_values(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        ["runbook", "hardware/gpu-xid", "--json", "--set", "culprit_host=gpu-node-017", "--set", "xid=79"]
    )
    assert status == 0
    document = json.loads(capsys.readouterr().out)
    assert document["class"] == "hardware/gpu-xid"
    assert document["steps"][0]["command"] == (
        "scontrol update NodeName=gpu-node-017 State=DRAIN Reason=ncclbot-gpu-xid-79"
    )


def test_set_values_are_taken_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "network/peer-exit", "--json", "--set", "culprit_host=017"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["verify"]["command"] == "ncclbot probe 017 --via slurm"


def test_text_output_fits_the_requested_width(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "shm/dev-shm", "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert "df -h /dev/shm" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_list_shows_every_class(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert sorted(listed) == sorted(CLASSES)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runbook", "nope/nothing"], "no runbook for class 'nope/nothing'"),
        (["runbook"], "give a CLASS"),
        (["runbook", "cuda/oom", "--set", "hostname=x"], "unknown field 'hostname'"),
        (["runbook", "cuda/oom", "--set", "culprit_host"], "expects FIELD=VALUE"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_module_entry_point_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot", "runbook", "unknown", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["class"] == "unknown"
