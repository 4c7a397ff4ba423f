"""`ncclbot eval`: accuracy figures on a labelled corpus, and the development corpus as a regression bar."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bot.evaluation import culprit_verdict, evaluate
from matcher.model import Culprit, Diagnosis, Stats
from tests.cli.helpers import EXAMPLE, run_cli, run_json

# The development corpus must stay at or above these (issue: top-1 >= 90%, top-3 >= 97%).
DEV_TOP1 = 0.90
DEV_TOP3 = 0.97


def make_corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copytree(EXAMPLE, corpus / "oom-case")
    (corpus / "quiet-case.log").write_text("nothing to see here\n")
    cases = [
        {"id": "oom-case", "label": "cuda/oom", "culprit_rank": 5, "culprit_host": "gpu-node-02"},
        {"id": "quiet-case", "label": "network/ib-rdma", "culprit_rank": None, "culprit_host": None},
    ]
    (corpus / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    return corpus


def test_report_counts_hits_misses_and_culprits(tmp_path: Path) -> None:
    report = evaluate(make_corpus(tmp_path))
    by_id = {case.case_id: case for case in report.cases}
    assert report.total == 2
    assert by_id["oom-case"].top1 and by_id["oom-case"].culprit == "agree"
    assert not by_id["quiet-case"].top3 and by_id["quiet-case"].predicted[0] == "unknown"
    assert report.confusion()[("network/ib-rdma", "unknown")] == 1


def test_cli_prints_accuracy_lines_and_json(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path)
    result = run_cli("eval", str(corpus))
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert "top-1: 1/2 (50.0%)" in out and "top-3: 1/2 (50.0%)" in out
    document = run_json("eval", str(corpus))
    assert document["top1"] == 1 and document["cases"] == 2


def test_missing_cases_file_is_a_clean_error(tmp_path: Path) -> None:
    result = run_cli("eval", str(tmp_path))
    assert result.returncode == 2
    assert "cases.jsonl" in result.stderr.decode()


def _diagnosis(culprit: Culprit | None) -> Diagnosis:
    from matcher.model import ClassScore

    return Diagnosis((ClassScore("cuda/oom", 0.9, "t"),), culprit, None, Stats())


@pytest.mark.parametrize(
    ("case", "culprit", "verdict"),
    [
        ({"culprit_rank": 3}, Culprit((3,), ("n1",), "r"), "agree"),
        ({"culprit_rank": 3}, Culprit((4,), ("n1",), "r"), "wrong"),
        ({"culprit_host": "n2"}, Culprit((3,), ("n1",), "r"), "wrong"),
        ({"culprit_rank": 0, "culprit_host": "n1"}, Culprit((), ("n1",), "r"), "agree"),
        ({"culprit_rank": 0}, Culprit((), ("n1",), "r"), "missed"),
        ({"culprit_rank": 3}, None, "missed"),
        ({}, Culprit((1,), (), "r"), "extra"),
        ({}, None, "none"),
    ],
)
def test_culprit_verdicts(case: dict[str, object], culprit: Culprit | None, verdict: str) -> None:
    assert culprit_verdict(case, _diagnosis(culprit)) == verdict


def test_development_corpus_accuracy(shared_dir: Path) -> None:
    corpus = shared_dir / "corpus-dev"
    if not (corpus / "cases.jsonl").is_file():
        pytest.skip("../shared/corpus-dev is absent")
    report = evaluate(corpus)
    top1 = report.count(lambda c: c.top1) / report.total
    top3 = report.count(lambda c: c.top3) / report.total
    misses = [(c.case_id, c.label, c.predicted[:3]) for c in report.cases if not c.top1]
    assert top1 >= DEV_TOP1, misses
    assert top3 >= DEV_TOP3, misses
    assert report.count(lambda c: c.culprit == "wrong") == 0, [
        c.case_id for c in report.cases if c.culprit == "wrong"
    ]
