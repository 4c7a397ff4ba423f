"""`ncclbot report`: the store's figures on a seeded history, as a person and as JSON."""

from __future__ import annotations

from pathlib import Path

from bot.store import Store
from tests.cli.helpers import run_cli, run_json
from tests.store.seed import NOW, seed_history


def _seeded_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'report.sqlite3'}"
    with Store.open(url) as store:
        seed_history(store)
    return url


def test_report_json_carries_the_seeded_figures(tmp_path: Path) -> None:
    url = _seeded_url(tmp_path)
    report = run_json("report", "--days", "30", "--as-of", NOW.isoformat(), "--database-url", url)
    cost = {r["key"]: round(r["gpu_hours"], 3) for r in report["gpu_hours_lost_by_class"]}
    assert cost == {"network/ib-rdma": 192.0, "timeout/rank0-only-work": 8.0, "cuda/oom": 5.333}
    by_node = {r["key"]: (r["count"], r["trend"]) for r in report["recurrence_by_node"]}
    assert by_node["gpu-node-020"][0] == 3
    assert report["lemon_nodes"][0]["hostname"] in {"gpu-node-017", "gpu-node-020"}
    assert {f["fix"] for f in report["fix_effectiveness"]} >= {"reseat GPU"}


def test_report_for_a_person_and_bad_arguments(tmp_path: Path) -> None:
    url = _seeded_url(tmp_path)
    result = run_cli("report", "--days", "7", "--as-of", NOW.isoformat(), "--database-url", url)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    for heading in ("recurrence by class", "lemon nodes", "GPU-hours lost", "time to resolve"):
        assert heading in out
    assert "gpu-node-017" in out
    bad = run_cli("report", "--as-of", "yesterday", "--database-url", url)
    assert bad.returncode == 2 and "ISO time" in bad.stderr.decode()
