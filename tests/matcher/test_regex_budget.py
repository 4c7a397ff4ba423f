"""One regex time budget per diagnosis: time-outs are capped across sources, archive members and
worker processes, not per source (20 members of hostile lines used to cost 20 budgets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.pipeline import diagnose
from matcher.reading.read import iter_sources
from matcher.scanning import scan as scan_module
from matcher.scanning.catalog import load_catalog
from matcher.scanning.regex_budget import PER_SIGNATURE, RegexBudget

# A context signature (its lines are not screened by Hyperscan) whose pattern backtracks exponentially
# on a run of "a" without the final "b": every such line costs a full regex time-out.
CATASTROPHIC = """
[[signature]]
id = "catastrophic"
classes = []
role = "context"
keywords = ["aaaa"]
pattern = '(?:a|aa)+b'
description = "backtracks exponentially on aaaa...c"
match = ["aaaab"]
no_match = ["xyz"]
"""
HOSTILE_LINE = "a" * 48 + "c\n"


@pytest.fixture()
def catalog(tmp_path: Path):
    folder = tmp_path / "signatures"
    folder.mkdir()
    (folder / "catastrophic.toml").write_text(CATASTROPHIC)
    return load_catalog(folder)


def _bundle(root: Path, files: int, lines: int) -> Path:
    root.mkdir()
    for index in range(files):
        (root / f"rank{index}.log").write_text(HOSTILE_LINE * lines)
    return root


def test_regex_time_outs_are_capped_once_per_diagnosis_across_sources(
    tmp_path: Path, catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    spent: list[str] = []
    real_spend = RegexBudget.spend
    monkeypatch.setattr(RegexBudget, "spend", lambda self, sid: (spent.append(sid), real_spend(self, sid)))
    bundle = _bundle(tmp_path / "bundle", files=20, lines=25)
    diagnose([str(bundle)], catalog=catalog)
    assert len(spent) == PER_SIGNATURE  # not 20 sources x 20


def test_worker_processes_share_one_regex_budget(
    tmp_path: Path, catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCCLBOT_WORKERS", "2")
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)  # workers even for this small bundle
    bundle = _bundle(tmp_path / "bundle", files=8, lines=25)
    budget = RegexBudget([s.id for s in catalog], shared=True)
    scan_module.scan(iter_sources([str(bundle)]), catalog, budget=budget)
    # Each process checks the shared count before a regex runs, so the two that scan (a worker and this
    # one) may overshoot it by one.
    assert PER_SIGNATURE <= budget.spent() <= PER_SIGNATURE + 1  # not 8 sources x 20
