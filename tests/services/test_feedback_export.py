"""Corrected incidents become labelled cases: `ncclbot feedback export DIR` writes what `ncclbot eval`
reads (cases.jsonl + each case's logs), from the files kept with each incident."""

from __future__ import annotations

import json
from pathlib import Path

from bot.evaluation import evaluate
from bot.services.bundles import SpooledFile, keep
from bot.services.diagnose import DiagnosisRequest, diagnose_and_record
from bot.store import Store
from tests.cli.helpers import EXAMPLE, run_cli


def diagnosed_incident(store_url: str, bundle: Path, tmp_path: Path) -> int:
    logs = sorted(EXAMPLE.glob("*.log"))
    outcome = diagnose_and_record(
        DiagnosisRequest(paths=[str(p) for p in logs], source="slack", database_url=store_url)
    )
    assert outcome.incident is not None
    with Store.open(store_url) as store:
        files = [SpooledFile(p.name, p, p.stat().st_size, f"slack:F{i}") for i, p in enumerate(logs)]
        assert keep(store, bundle, outcome.incident.id, files, cap_bytes=1 << 30) == len(logs)
        assert keep(store, bundle, outcome.incident.id, files, cap_bytes=1 << 30) == 0  # joins once
    return int(outcome.incident.id)


def test_export_writes_cases_that_eval_reads(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    incident = diagnosed_incident(url, tmp_path / "bundles", tmp_path)
    with Store.open(url) as store:
        store.record_feedback(
            incident, "U1", correct=False, corrected_class="system/host-oom", note="cgroup OOM"
        )
    out = tmp_path / "export"
    result = run_cli("feedback", "export", str(out), env={"NCCLBOT_DATABASE_URL": url})
    assert result.returncode == 0, result.stderr.decode()
    assert b"wrote 1 case(s)" in result.stdout
    [case] = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert case == {
        "id": f"incident-{incident}",
        "label": "system/host-oom",
        "source": "feedback",
        "incident": incident,
        "note": "cgroup OOM",
    }
    assert sorted(p.name for p in (out / case["id"]).iterdir()) == sorted(
        p.name for p in EXAMPLE.glob("*.log")
    )
    report = evaluate(out)
    assert report.total == 1 and report.cases[0].label == "system/host-oom"
    assert report.cases[0].predicted[0] == "cuda/oom"  # the matcher's miss, now a labelled case


def test_confirmed_diagnosis_keeps_its_class_and_culprit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    incident = diagnosed_incident(url, tmp_path / "bundles", tmp_path)
    with Store.open(url) as store:
        store.record_feedback(incident, "U1", correct=True)
    out = tmp_path / "export"
    assert run_cli("feedback", "export", str(out), env={"NCCLBOT_DATABASE_URL": url}).returncode == 0
    [case] = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert case["label"] == "cuda/oom" and "culprit_host" in case
    assert evaluate(out).cases[0].top1


def test_incident_without_kept_logs_is_skipped_with_the_reason(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    outcome = diagnose_and_record(
        DiagnosisRequest(paths=[str(EXAMPLE / "rank0.log")], source="cli", database_url=url)
    )
    with Store.open(url) as store:
        store.record_feedback(outcome.incident.id, "U1", correct=True)  # type: ignore[union-attr]
    result = run_cli("feedback", "export", str(tmp_path / "out"), env={"NCCLBOT_DATABASE_URL": url})
    assert result.returncode == 0
    assert b"no log files kept" in result.stderr and b"wrote 0 case(s)" in result.stdout
