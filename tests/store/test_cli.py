"""`ncclbot history`, `ncclbot incidents` and `ncclbot db upgrade` through the real CLI entry point."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.cli import main
from bot.store import Store
from bot.store.migrate import head_revision
from tests.store.diagnoses import make_diagnosis


def _run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    document: dict = json.loads(capsys.readouterr().out)
    return document


@pytest.fixture
def recorded(database_url: str) -> str:
    now = datetime.now(UTC)
    with Store.open(database_url) as store:
        first = store.record_diagnosis(
            make_diagnosis(facts={"world_size": 8, "timeout_ms": 600_000}),
            job_id="1001",
            input_digest="a",
            now=now - timedelta(hours=2),
        )
        store.record_diagnosis(
            make_diagnosis("hardware/gpu-xid", host="gpu-node-018", signatures=("xid",)),
            input_digest="b",
            source="webhook",
            now=now - timedelta(hours=1),
        )
        store.record_probe_run({"verdict": "failed", "reasons": ["Xid 79"]}, node="gpu-node-018", started=now)
        store.resolve_incident(first.id, "alice", "drained", now=now - timedelta(minutes=30))
    return database_url


def test_history_json(recorded: str, capsys: pytest.CaptureFixture[str]) -> None:
    document = _run_json(capsys, "history", "--json", "--database-url", recorded)
    assert (document["days"], document["node"], document["class"]) == (30, None, None)
    assert [o["class"] for o in document["occurrences"]] == ["hardware/gpu-xid", "cuda/oom"]
    newest, oldest = document["occurrences"]
    assert set(newest) == {
        "id", "incident", "time", "class", "host", "cluster", "source", "job_id", "confidence",
        "world_size", "gpu_hours_lost", "analysis_version",
    }  # fmt: skip
    assert (newest["host"], newest["source"], newest["job_id"]) == ("gpu-node-018", "webhook", None)
    assert (oldest["job_id"], oldest["gpu_hours_lost"]) == ("1001", pytest.approx(8 / 6, abs=1e-3))
    assert newest["time"].endswith("Z")
    assert [(r["host"], r["verdict"], r["reasons"]) for r in document["probe_runs"]] == [
        ("gpu-node-018", "failed", ["Xid 79"])
    ]


def test_history_filters(recorded: str, capsys: pytest.CaptureFixture[str]) -> None:
    on_017 = _run_json(capsys, "history", "--node", "GPU-NODE-017", "--json", "--database-url", recorded)
    assert [o["host"] for o in on_017["occurrences"]] == ["gpu-node-017"] and on_017["probe_runs"] == []
    xid = _run_json(
        capsys, "history", "--class", "hardware/gpu-xid", "--days", "1", "--json", "--database-url", recorded
    )
    assert [o["class"] for o in xid["occurrences"]] == ["hardware/gpu-xid"]


def test_history_text(recorded: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--database-url", recorded]) == 0
    out = capsys.readouterr().out
    assert "2 occurrence(s) in the last 30 days" in out
    assert "gpu-node-017" in out and "job 1001" in out and "~1.3 GPU-h" in out
    assert "failed" in out and "Xid 79" in out


def test_incidents_json(recorded: str, capsys: pytest.CaptureFixture[str]) -> None:
    everything = _run_json(capsys, "incidents", "--json", "--database-url", recorded)["incidents"]
    assert [(i["class"], i["status"]) for i in everything] == [
        ("hardware/gpu-xid", "open"),
        ("cuda/oom", "resolved"),
    ]
    resolved = everything[1]
    assert resolved["resolution"]["by"] == "alice" and resolved["resolution"]["fix"] == "drained"
    assert resolved["fingerprint"].startswith("v1:") and resolved["occurrences"] == 1
    only_open = _run_json(capsys, "incidents", "--open", "--json", "--database-url", recorded)["incidents"]
    assert [i["class"] for i in only_open] == ["hardware/gpu-xid"]


def test_database_url_from_the_environment(
    recorded: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCCLBOT_DATABASE_URL", recorded)
    assert len(_run_json(capsys, "incidents", "--json")["incidents"]) == 2


def test_db_upgrade(database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "upgrade", "--database-url", database_url]) == 0
    assert f"upgraded from an empty database to revision {head_revision()}" in capsys.readouterr().out
    assert main(["db", "upgrade", "--database-url", database_url]) == 0
    assert f"already at revision {head_revision()}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["incidents", "--database-url", "mysql://db/x"], "unsupported database 'mysql'"),
        (["incidents", "--database-url", "sqlite://"], "needs a SQLite file"),
        (["db", "upgrade", "--database-url", "postgresql://nobody@127.0.0.1:9/x"], "cannot use the database"),
    ],
)
def test_unusable_database_is_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv", [["history", "--days", "0"], ["history", "--class", "cuda/nonsense"]])
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
