"""Diagnoses of real torchrun runs: four CPU ranks over gloo on loopback, one rank made to fail.

Nothing here is mocked or written from memory: each test launches torchrun (tests/fixtures/
torchrun_faults.py), lets one rank die, raise, exit or stall, and diagnoses what the launcher and the
ranks printed. Loopback addresses fill these logs, as on any single machine, and must never be a culprit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from matcher.model import Diagnosis
from matcher.pipeline import diagnose
from tests.cli.helpers import run_cli
from tests.fixtures.torchrun_faults import Run, run

pytest.importorskip("torch.distributed", reason="torch is needed to record real torchrun runs")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("torchrun")
    cases = {
        "sigkill": dict(fault="sigkill", bad_rank=3),
        "segv": dict(fault="segv", bad_rank=2),
        "exception": dict(fault="exception", bad_rank=2),
        "exit": dict(fault="exit", bad_rank=2),
        "sleep": dict(fault="sleep", bad_rank=2, pg_timeout=6),
        "two-nodes-sigkill": dict(fault="sigkill", bad_rank=3, nodes=2, per_node=2),
        "two-nodes-exit": dict(fault="exit", bad_rank=3, nodes=2, per_node=2),
    }
    return {name: run(root / name, **kwargs) for name, kwargs in cases.items()}  # type: ignore[arg-type]


def _diagnose(*paths: Path) -> Diagnosis:
    return diagnose([str(p) for p in paths]).diagnosis


def _first_class(d: Diagnosis) -> str:
    return d.diagnoses[0].class_id


def test_a_sigkilled_rank_is_read_as_the_host_oom_killer_with_no_loopback_host(runs: dict[str, Run]) -> None:
    d = _diagnose(*runs["sigkill"].console)
    assert _first_class(d) == "system/host-oom"
    assert d.culprit is not None and d.culprit.ranks == (3,) and d.culprit.hosts == ()
    document = json.loads(run_cli("diagnose", "--no-store", "--json", str(runs["sigkill"].console[0])).stdout)
    commands = " ".join(step.get("command") or "" for step in document["runbook"]["steps"])
    assert "127.0.0.1" not in commands and "localhost" not in commands


def test_a_segfaulted_rank_is_named_with_its_signal(runs: dict[str, Run]) -> None:
    d = _diagnose(*runs["segv"].console)
    assert d.culprit is not None and d.culprit.ranks == (2,)
    assert "SIGSEGV" in d.culprit.reason


def test_a_python_exception_names_its_rank_type_and_line(runs: dict[str, Run]) -> None:
    for paths in (runs["exception"].console, runs["exception"].log_dirs):
        d = _diagnose(*paths)
        assert _first_class(d) == "application/python-exception"
        assert d.culprit is not None and d.culprit.ranks == (2,)
        assert "ValueError" in d.culprit.reason and "train.py:" in d.culprit.reason


def test_a_rank_that_exited_without_a_word_while_its_peers_lost_it_is_the_culprit(
    runs: dict[str, Run],
) -> None:
    d = _diagnose(*runs["exit"].console)
    assert d.culprit is not None and d.culprit.ranks == (2,)
    assert "exited with code 3" in d.culprit.reason


def test_the_one_rank_whose_own_log_reports_no_timeout_never_joined_the_collective(
    runs: dict[str, Run],
) -> None:
    d = _diagnose(*runs["sleep"].log_dirs)
    assert _first_class(d).startswith("timeout/")
    assert d.culprit is not None and d.culprit.ranks == (2,)
    # The launcher's output alone shows the timed-out ranks failing first: it names no wrong rank.
    console = _diagnose(*runs["sleep"].console)
    assert console.culprit is None or console.culprit.ranks == (2,)


@pytest.mark.parametrize("fault, culprit", [("sigkill", 3), ("segv", 2), ("exit", 2)])
def test_per_rank_logs_without_the_launcher_never_name_a_wrong_rank(
    runs: dict[str, Run], fault: str, culprit: int
) -> None:
    # The agent stops the survivors within moments, so more than one rank's log stays empty: the logs
    # cannot tell the dead rank from one stopped before it wrote, and no rank may be guessed.
    d = _diagnose(*runs[fault].log_dirs)
    assert _first_class(d) == "network/peer-exit"
    assert d.culprit is None or d.culprit.ranks == (culprit,)


def test_a_multi_node_teardown_is_not_read_as_a_rendezvous_failure(runs: dict[str, Run]) -> None:
    two = runs["two-nodes-sigkill"]
    d = _diagnose(*two.console)
    assert _first_class(d) == "system/host-oom"
    assert d.culprit is not None and d.culprit.ranks == (3,)
    assert not any(h in ("127.0.0.1", "localhost") for h in d.culprit.hosts)


def test_of_one_root_cause_entry_per_agent_the_silent_exit_is_the_first_failure(runs: dict[str, Run]) -> None:
    # Each agent records its own first failure: rank 3's silent exit, and a survivor that lost it.
    d = _diagnose(*runs["two-nodes-exit"].console)
    assert d.culprit is not None and d.culprit.ranks == (3,)
    assert len(d.culprit.hosts) == 1 and d.culprit.hosts[0] in ("node0", "node1")
