"""Diagnoses of real torchrun and torch.multiprocessing.spawn runs: four CPU ranks over gloo on
loopback, one rank made to fail.

Nothing here is mocked or written from memory: each test launches torchrun or spawn (tests/fixtures/
torchrun_faults.py), lets one rank die, raise, exit, stall or call another collective, and diagnoses what
the launcher and the ranks printed. Loopback addresses fill these logs, as on any single machine, and
must never be a culprit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from matcher.model import Diagnosis
from matcher.pipeline import diagnose
from tests.cli.helpers import run_cli
from tests.fixtures.torchrun_faults import Run, run, spawn

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
        "monitored": dict(fault="monitored", bad_rank=2),
        "two-nodes-sigkill": dict(fault="sigkill", bad_rank=3, nodes=2, per_node=2),
        "two-nodes-exit": dict(fault="exit", bad_rank=3, nodes=2, per_node=2),
        "detail-broadcast": dict(fault="broadcast", bad_rank=2, detail=True),
    }
    return {name: run(root / name, **kwargs) for name, kwargs in cases.items()}  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def spawned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("spawn")
    return {fault: spawn(root / fault, fault, bad_rank=2) for fault in ("sigkill", "exception", "exit")}


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


def test_a_monitored_barrier_names_the_rank_that_never_came_not_its_coordinator(runs: dict[str, Run]) -> None:
    # Rank 0 reports "Rank 2 failed to pass monitoredBarrier"; ranks 1 and 3 report errors "from rank 0",
    # the barrier's coordinator, which only relayed rank 2's absence (and exited first).
    for paths in (runs["monitored"].console, runs["monitored"].log_dirs):
        d = _diagnose(*paths)
        assert d.culprit is not None and d.culprit.ranks == (2,)


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


def test_under_detail_debug_the_rank_whose_collective_differs_is_the_culprit(runs: dict[str, Run]) -> None:
    # Every rank raises the mismatch and torchrun's Root Cause entry names whichever exited first; the
    # reports themselves show which rank's collective differs from the others'.
    d = _diagnose(*runs["detail-broadcast"].console)
    assert _first_class(d) == "timeout/asymmetric-collectives"
    assert d.culprit is not None and d.culprit.ranks == (2,)
    assert "odd one out" in d.culprit.reason


@pytest.mark.parametrize(
    "fault, first_class, said",
    [
        ("sigkill", "system/host-oom", "killed by SIGKILL"),
        ("exception", "application/python-exception", "raised ValueError at"),
        ("exit", None, "exited with code 3"),
    ],
)
def test_spawn_names_the_process_that_failed_first(
    spawned: dict[str, Path], fault: str, first_class: str | None, said: str
) -> None:
    d = _diagnose(spawned[fault])
    if first_class is not None:
        assert _first_class(d) == first_class
    assert d.culprit is not None and d.culprit.ranks == (2,) and d.culprit.hosts == ()
    assert said in d.culprit.reason


def test_spawn_s_exit_record_alone_names_nobody(spawned: dict[str, Path], tmp_path: Path) -> None:
    # Without spawn's own lines stopping the other processes, nothing says the others still ran.
    lines = spawned["exit"].read_text().splitlines()
    [record] = [line for line in lines if "ProcessExitedException:" in line]
    paste = tmp_path / "paste.log"
    paste.write_text(record + "\n")
    assert _diagnose(paste).culprit is None
