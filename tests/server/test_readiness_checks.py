"""The readiness checks one at a time, against real things: a closed PostgreSQL port, an empty SQLite
file, and a fake Slack Web API on loopback answering `auth.test` as Slack does."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bot.server.ops import SlackAuthCheck, database_check, migrations_check, run_checks
from bot.store.engine import create_store_engine


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def fake_slack(answer: dict[str, object]) -> Iterator[tuple[str, list[str]]]:
    """A Slack Web API that answers every auth.test with `answer`; yields its base URL and the
    Authorization headers it received."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            body = json.dumps(answer if self.path == "/api/auth.test" else {"ok": False}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/api/", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_slack_check_passes_when_slack_accepts_the_token_and_asks_once_per_ttl() -> None:
    with fake_slack({"ok": True, "team": "T1", "user_id": "U0BOT"}) as (url, seen):
        check = SlackAuthCheck(url, "xoxb-1-2-good", ttl=60)
        assert check() is None
        assert check() is None
    assert seen == ["Bearer xoxb-1-2-good"]


def test_slack_check_names_slacks_refusal() -> None:
    with fake_slack({"ok": False, "error": "invalid_auth"}) as (url, _):
        assert (
            SlackAuthCheck(url, "xoxb-1-2-revoked", ttl=0)()
            == "auth.test refused the bot token: invalid_auth"
        )


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
