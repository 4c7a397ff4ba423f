"""`/readyz`, `/metrics` and the request id, against `ncclbot serve` running as a real process on a
real SQLite store."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine

from bot import metrics
from bot.store import Store, migrate
from bot.store.queue import WorkQueue
from tests.conftest import need_service
from tests.fakes.slack_api import FakeSlack
from tests.fixtures.postgres_server import postgres_bin, private_postgres
from tests.server.helpers import running_server


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_readyz_is_ok_when_database_and_schema_are_and_echoes_the_request_id(tmp_path: Path) -> None:
    env = {"NCCLBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'bot.sqlite3'}", "NCCLBOT_LOG_FORMAT": "json"}
    with running_server(env) as server:
        status, headers, body = get(f"{server.url}/readyz", {"X-Request-Id": "lb-probe-7"})
        assert status == 200
        answer = json.loads(body)
        assert answer["status"] == "ok"
        # Other front ends add their own checks; these two are always there.
        assert answer["checks"]["database"] == answer["checks"]["migrations"] == "ok"
        assert set(answer["checks"].values()) == {"ok"}
        assert headers["X-Request-Id"] == "lb-probe-7"

        status, headers, _ = get(f"{server.url}/no-such-page")
        assert status == 404
        generated = headers["X-Request-Id"]
        assert len(generated) == 16
        # A forged id (it would land in every log line) is replaced, not copied.
        _, forged, _ = get(f"{server.url}/healthz", {"X-Request-Id": 'x", "level": "ERROR'})
        assert forged["X-Request-Id"] != 'x", "level": "ERROR'
        log = server.log()
    [access] = [line for line in json_lines(log) if line.get("path") == "/no-such-page"]
    assert access["request_id"] == generated
    assert access["status"] == 404
    assert access["logger"] == "ncclbot.http"
    assert access["level"] == "INFO"


@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection")  # alembic on SQLite, harmless
def test_readyz_is_503_naming_the_schema_when_the_database_is_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bot.sqlite3'}"
    with running_server({"NCCLBOT_DATABASE_URL": url}) as server:
        assert get(f"{server.url}/readyz")[0] == 200
        engine = create_engine(url)
        try:
            migrate.downgrade(engine, "0001")  # someone restored an old backup under the running bot
        finally:
            engine.dispose()
        status, _, body = get(f"{server.url}/readyz")
    answer = json.loads(body)
    assert status == 503
    assert answer["status"] == "unavailable"
    assert answer["checks"]["database"] == "ok"
    assert answer["checks"]["migrations"].startswith("schema at revision 0001, this ncclbot needs ")


def test_metrics_parse_as_prometheus_text_and_show_the_shared_queue(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bot.sqlite3'}"
    with Store.open(url) as store:
        queue = WorkQueue(store)
        an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
        # Kinds no worker of the server handles, so that nothing drains them during the test.
        queue.enqueue("test-kind-a", "c1/1001/0", {"job_id": "1001"}, now=an_hour_ago)
        queue.enqueue("test-kind-a", "c1/1002/0", {"job_id": "1002"})
        queue.enqueue("test-kind-b", "F0123", {"file": "F0123"})
    with running_server({"NCCLBOT_DATABASE_URL": url}) as server:
        status, headers, body = get(f"{server.url}/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")  # what every Prometheus reads
    families = {family.name: family for family in text_string_to_metric_families(body.decode())}

    defined = [m for m in vars(metrics).values() if isinstance(m, MetricWrapperBase)]
    assert len(defined) >= 10
    for metric in defined:
        assert metric._name in families, f"{metric._name} is not exposed"

    depth = {s.labels["kind"]: s.value for s in families["ncclbot_queue_depth"].samples}
    assert depth == {"test-kind-a": 2.0, "test-kind-b": 1.0}
    [oldest] = families["ncclbot_queue_oldest_pending_seconds"].samples
    assert 3500 < oldest.value < 3700
    assert families["process_resident_memory_bytes"].samples[0].value > 0


@pytest.mark.postgres
def test_a_database_outage_makes_readyz_fail_and_recover_while_healthz_and_metrics_answer() -> None:
    need_service(postgres_bin() is not None, "the PostgreSQL binaries (source .ci/services/postgres.sh)")
    with private_postgres() as database, running_server({"NCCLBOT_DATABASE_URL": database.url}) as server:
        assert get(f"{server.url}/readyz")[0] == 200
        database.stop()
        status, _, body = get(f"{server.url}/readyz")
        checks = json.loads(body)["checks"]
        assert status == 503
        assert checks["database"].startswith("unreachable: ")
        assert get(f"{server.url}/healthz")[0] == 200  # alive: no restart for a database outage
        assert get(f"{server.url}/metrics")[0] == 200  # stale queue figures, but the scrape answers
        database.start()
        deadline = time.monotonic() + 30
        while get(f"{server.url}/readyz")[0] != 200:
            assert time.monotonic() < deadline, "readiness did not come back after the database did"
            time.sleep(0.5)


def test_readyz_checks_slack_when_slack_is_configured(tmp_path: Path) -> None:
    with FakeSlack() as slack:
        env = {**slack.env(), "SLACK_SIGNING_SECRET": "8f14e45fceea167a5a36dedd4bea2543"}
        env["NCCLBOT_DATABASE_URL"] = f"sqlite:///{tmp_path / 'bot.sqlite3'}"
        with running_server(env) as server:
            status, _, body = get(f"{server.url}/readyz")
            assert (status, json.loads(body)["checks"]["slack"]) == (200, "ok")
        # The same server with a token Slack no longer accepts (revoked, or the app reinstalled).
        with running_server({**env, "SLACK_BOT_TOKEN": "xoxb-revoked-token"}) as server:
            status, _, body = get(f"{server.url}/readyz")
            assert status == 503
            assert json.loads(body)["checks"]["slack"] == "auth.test refused the bot token: invalid_auth"
            assert "xoxb-revoked-token" not in server.log()
