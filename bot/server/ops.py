"""Operations endpoints and request plumbing: `/readyz` (may this replica take traffic?), `/metrics`
(Prometheus text, bot.metrics), and for every HTTP request a request id (`X-Request-Id`, kept in the
log context for the whole request) and one access-log line.

`/healthz` (app.py) only says the process serves requests: a liveness probe that fails restarts the
process. `/readyz` runs the readiness checks of every plug-in (this one adds the database, the schema
and, when no plug-in checks Slack itself, Slack's `auth.test`: bot.server.readiness) and answers 503
while any fails, so a load balancer stops sending traffic without restarting anything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from flask import Blueprint, Response, g, jsonify, request
from prometheus_client import REGISTRY
from prometheus_client.exposition import choose_encoder

from bot import logs, metrics
from bot.server.context import ServerContext
from bot.server.readiness import SlackAuthCheck, database_check, migrations_check, run_checks
from bot.store.engine import database_error_reason
from bot.store.queue import WorkQueue

log = logging.getLogger("ncclbot.http")

# Probes and scrapers poll these every few seconds: their access lines go to DEBUG.
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


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
