"""Readiness checks: each returns None when fine, else one line saying what is wrong (`/readyz` shows
them). They run side by side with a deadline, so a hung dependency fails readiness instead of hanging
the probe."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import Engine, inspect, text

from bot.server.context import ReadinessCheck
from bot.settings import Settings
from bot.store import migrate
from bot.store.engine import database_error_reason

# A check that takes longer than this counts as failed: a readiness probe must answer in time even
# when the database host is unreachable and a TCP connect would hang for minutes.
CHECK_TIMEOUT_S = 5.0
# Slack's auth.test is asked at most this often, however often the probe polls.
SLACK_CHECK_TTL_S = 30.0
VERSION_TABLE = "alembic_version"  # Alembic's default, which bot/store/migrations keeps


def run_checks(
    checks: Mapping[str, ReadinessCheck], timeout: float = CHECK_TIMEOUT_S
) -> dict[str, str | None]:
    """Run every check at once, each in its own thread; a check still running at `timeout` or raising
    counts as failed with that reason."""
    results: dict[str, str | None] = {name: f"no answer within {timeout:g} s" for name in checks}

    def run(name: str, check: ReadinessCheck) -> None:
        try:
            results[name] = check()
        except Exception as error:  # a broken check must fail readiness, not the endpoint
            results[name] = f"{type(error).__name__}: {error}"

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in checks.items()]
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return dict(results)


def database_check(engine: Engine) -> ReadinessCheck:
    def check() -> str | None:
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except Exception as error:
            return f"unreachable: {database_error_reason(error)}"
        return None

    return check


def schema_revision(engine: Engine) -> str | None:
    """The revision Alembic recorded, read directly: asking Alembic itself logs two INFO lines per call,
    and readiness is polled every few seconds."""
    with engine.connect() as connection:
        if not inspect(connection).has_table(VERSION_TABLE):
            return None
        revision = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
        return None if revision is None else str(revision)


def migrations_check(engine: Engine) -> ReadinessCheck:
    def check() -> str | None:
        try:
            current = schema_revision(engine)
        except Exception as error:
            return f"cannot read the schema revision: {database_error_reason(error)}"
        head = migrate.head_revision()
        if current != head:
            found = current or "none"
            return f"schema at revision {found}, this ncclbot needs {head} (run `ncclbot db upgrade`)"
        return None

    return check


@dataclass
class SlackAuthCheck:
    """Slack accepts the bot token (`auth.test`), asked at most every `ttl` seconds."""

    api_url: str
    token: str
    ttl: float = SLACK_CHECK_TTL_S
    _cached: tuple[float, str | None] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> SlackAuthCheck:
        assert settings.slack_bot_token is not None
        return cls(settings.slack_api_url, settings.slack_bot_token.get_secret_value())

    def __call__(self) -> str | None:
        with self._lock:
            if self._cached is not None and time.monotonic() - self._cached[0] < self.ttl:
                return self._cached[1]
        problem = self._ask()
        with self._lock:
            self._cached = (time.monotonic(), problem)
        return problem

    def _ask(self) -> str | None:
        call = urllib.request.Request(
            f"{self.api_url}auth.test",
            data=b"",
            method="POST",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(call, timeout=CHECK_TIMEOUT_S - 1) as response:
                answer = json.load(response)
        except (OSError, ValueError) as error:
            return f"auth.test failed: {error}"
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            reason = answer.get("error", "no reason given") if isinstance(answer, dict) else "not JSON"
            return f"auth.test refused the bot token: {reason}"
        return None
