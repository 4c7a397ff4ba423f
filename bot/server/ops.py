"""Operations endpoints and request plumbing: `/readyz` (may this replica take traffic?), `/metrics`
(Prometheus text, bot.metrics), and for every HTTP request a request id (`X-Request-Id`, kept in the
log context for the whole request) and one access-log line.

`/healthz` (app.py) only says the process serves requests: a liveness probe that fails restarts the
process. `/readyz` runs the readiness checks of every plug-in (this one adds the database, the schema
and, when no plug-in checks Slack itself, Slack's `auth.test`) and answers 503 while any fails, so a load
balancer stops sending traffic without restarting anything.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from flask import Blueprint, Response, g, jsonify, request
from prometheus_client import REGISTRY
from prometheus_client.exposition import choose_encoder
from sqlalchemy import Engine, inspect, text

from bot import logs, metrics
from bot.server.context import ReadinessCheck, ServerContext
from bot.settings import Settings
from bot.store import migrate
from bot.store.engine import database_error_reason
from bot.store.queue import WorkQueue

log = logging.getLogger("ncclbot.http")

# A check that takes longer than this counts as failed: a readiness probe must answer in time even
# when the database host is unreachable and a TCP connect would hang for minutes.
CHECK_TIMEOUT_S = 5.0
# Slack's auth.test is asked at most this often, however often the probe polls.
SLACK_CHECK_TTL_S = 30.0
# Probes and scrapers poll these every few seconds: their access lines go to DEBUG.
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
VERSION_TABLE = "alembic_version"  # Alembic's default, which bot/store/migrations keeps


def plug(context: ServerContext) -> None:
    store = context.store
    context.add_readiness_check("database", database_check(store.engine))
    context.add_readiness_check("migrations", migrations_check(store.engine))
    settings = context.settings
    if settings.slack_bot_token is not None and "slack" not in context.readiness:
        context.add_readiness_check("slack", SlackAuthCheck.from_settings(settings))
    queue_metrics = QueueMetrics(WorkQueue(store))
    context.add_blueprint(blueprint(context, refresh=[queue_metrics.refresh]))


def blueprint(context: ServerContext, refresh: list[Callable[[], None]]) -> Blueprint:
    ops = Blueprint("ops", __name__)

    @ops.before_app_request
    def _begin() -> None:
        request_id = logs.acceptable_request_id(request.headers.get("X-Request-Id")) or logs.new_request_id()
        g.request_id = request_id
        g.request_id_token = logs.REQUEST_ID.set(request_id)
        g.request_started = time.perf_counter()

    @ops.after_app_request
    def _end(response: Response) -> Response:
        response.headers["X-Request-Id"] = g.get("request_id", "")
        elapsed_ms = (time.perf_counter() - g.get("request_started", time.perf_counter())) * 1000
        log.log(
            logging.DEBUG if request.path in QUIET_PATHS else logging.INFO,
            "%s %s %d %.1f ms",
            request.method,
            request.path,
            response.status_code,
            elapsed_ms,
            extra={
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": round(elapsed_ms, 1),
            },
        )
        return response

    @ops.teardown_app_request
    def _forget(_error: BaseException | None) -> None:
        token = g.pop("request_id_token", None)
        if token is not None:
            logs.REQUEST_ID.reset(token)

    @ops.get("/readyz")
    def readyz() -> tuple[Response, int]:
        results = run_checks(context.readiness)
        ready = all(problem is None for problem in results.values())
        checks = {name: problem or "ok" for name, problem in results.items()}
        return jsonify(status="ok" if ready else "unavailable", checks=checks), 200 if ready else 503

    @ops.get("/metrics")
    def prometheus() -> Response:
        for hook in refresh:
            hook()
        # The format the scraper asks for (Prometheus' text format, or OpenMetrics when accepted).
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        return Response(encode(REGISTRY), content_type=content_type)

    return ops


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


class QueueMetrics:
    """Sets the queue gauges from the database at scrape time, so that depth and the oldest pending age
    are those of the shared queue (every replica reports the same), never a stale in-process count."""

    def __init__(self, queue: WorkQueue) -> None:
        self.queue = queue
        self._kinds: set[str] = set()

    def refresh(self) -> None:
        try:
            stats = self.queue.stats()
        except Exception as error:  # a scrape must still answer while the database is down
            log.warning("queue metrics not refreshed: %s", database_error_reason(error))
            return
        for kind in self._kinds - set(stats.waiting_by_kind):
            metrics.QUEUE_DEPTH.labels(kind=kind).set(0)
        for kind, count in stats.waiting_by_kind.items():
            metrics.QUEUE_DEPTH.labels(kind=kind).set(count)
        self._kinds |= set(stats.waiting_by_kind)
        metrics.QUEUE_OLDEST_AGE.set(stats.oldest_pending_age_s or 0.0)
        metrics.QUEUE_DEAD.set(stats.dead)
