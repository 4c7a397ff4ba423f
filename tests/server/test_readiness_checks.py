"""The readiness checks one at a time, against real things: a closed PostgreSQL port, an empty SQLite
file, and the tests' fake Slack Web API on loopback (tests/fakes/slack_api.py)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from bot.server.readiness import SlackAuthCheck, database_check, migrations_check, run_checks
from bot.store.engine import create_store_engine
from tests.fakes.slack_api import FakeSlack


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_slack_check_passes_when_slack_accepts_the_token_and_asks_once_per_ttl() -> None:
    with FakeSlack() as slack:
        check = SlackAuthCheck(slack.api_url, slack.bot_token, ttl=60)
        assert check() is None
        assert check() is None
        assert [call.token for call in slack.calls_to("auth.test")] == [slack.bot_token]


def test_slack_check_names_slacks_refusal() -> None:
    with FakeSlack() as slack:
        assert SlackAuthCheck(slack.api_url, "xoxb-revoked", ttl=0)() == (
            "auth.test refused the bot token: invalid_auth"
        )


def test_slack_check_fails_on_a_slack_outage() -> None:
    with FakeSlack() as slack:
        slack.fail("auth.test", status=503)
        problem = SlackAuthCheck(slack.api_url, slack.bot_token, ttl=0)()
    assert problem is not None and problem.startswith("auth.test failed:") and "503" in problem


def test_slack_check_fails_when_slack_is_unreachable() -> None:
    problem = SlackAuthCheck(f"http://127.0.0.1:{closed_port()}/api/", "xoxb-1-2-x")()
    assert problem is not None and problem.startswith("auth.test failed:")
    assert "xoxb-1-2-x" not in problem


def test_database_check_names_an_unreachable_postgresql() -> None:
    engine = create_store_engine(f"postgresql+psycopg://bot@127.0.0.1:{closed_port()}/ncclbot")
    try:
        problem = database_check(engine)()
    finally:
        engine.dispose()
    assert problem is not None and problem.startswith("unreachable: ")
    assert "\n" not in problem


def test_migrations_check_says_what_to_run_on_a_fresh_database(tmp_path: Path) -> None:
    engine = create_store_engine(f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    try:
        assert database_check(engine)() is None
        problem = migrations_check(engine)()
    finally:
        engine.dispose()
    assert problem is not None
    assert problem.startswith("schema at revision none, this ncclbot needs ")
    assert problem.endswith("(run `ncclbot db upgrade`)")


def test_a_hanging_or_broken_check_fails_readiness_within_the_timeout() -> None:
    release = threading.Event()

    def broken() -> str | None:
        raise RuntimeError("boom")

    def hangs() -> str | None:
        release.wait(30)
        return None

    started = time.monotonic()
    results = run_checks(
        {"ok": lambda: None, "hangs": hangs, "broken": broken},
        timeout=0.5,
    )
    release.set()
    assert time.monotonic() - started < 5
    assert results == {"ok": None, "hangs": "no answer within 0.5 s", "broken": "RuntimeError: boom"}
