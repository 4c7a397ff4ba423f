"""Plugs the job-failure webhook into `ncclbot serve`: the route, and the queue worker that posts."""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy.exc import SQLAlchemyError

from bot.server.context import ServerContext
from bot.services.job_failure import KIND, JobFailureService
from bot.services.worker import QueueWorker, is_outage
from bot.store import Store, StoreError
from bot.store.engine import database_error_reason
from bot.store.queue import WorkQueue
from bot.webhook.auth import WebhookAuth
from bot.webhook.intake import JobFailedIntake
from bot.webhook.routes import blueprint
from bot.webhook.worker import JobFailedHandler

log = logging.getLogger("ncclbot.webhook")


class _StoreCloser:
    """Closes the webhook's store connection pool when the server stops (after the worker)."""

    name = "webhook-store"

    def __init__(self, store: Store) -> None:
        self.store = store

    def start(self) -> None:
        return None

    def stop(self) -> None:
        self.store.close()


class StoreReplays:
    """Signed requests already accepted, remembered in the database (replicas share them) for two days,
    far beyond the five minutes a signature is good for."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def seen(self, key: str) -> bool:
        return self.store.processed(key)


def _queue_problem(queue: WorkQueue) -> str | None:
    """Readiness: the queue's database answers (else the webhook would answer 503)."""
    try:
        queue.stats()
    except (SQLAlchemyError, StoreError) as error:
        return f"job-failed queue: {database_error_reason(error)}"
    return None


def plug(context: ServerContext) -> None:
    settings = context.settings
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else None
    bearer = settings.webhook_bearer_token.get_secret_value() if settings.webhook_bearer_token else None
    store = Store.open(settings.database_url)
    auth = WebhookAuth(secret=secret, bearer_token=bearer, replays=StoreReplays(store))
    if not auth.configured:
        log.warning(
            "webhook: NCCLBOT_WEBHOOK_SECRET / NCCLBOT_WEBHOOK_BEARER_TOKEN unset: every request gets 401"
        )
    queue = WorkQueue(store)
    service = JobFailureService(settings, store, context.outlet)
    worker = QueueWorker(
        queue,
        {KIND: JobFailedHandler(service)},
        threads=settings.webhook_workers,
        lease=timedelta(seconds=settings.webhook_lease_s),
        outage=is_outage,  # Slack or the database down: retried as long as it takes, nothing lost
    )
    worker.name = "webhook-worker"
    context.add_background(_StoreCloser(store))
    context.add_background(worker)
    context.add_readiness_check("webhook-queue", lambda: _queue_problem(queue))
    context.add_blueprint(
        blueprint(JobFailedIntake(auth, queue, max_bytes=settings.webhook_max_bytes, on_enqueued=worker.wake))
    )
