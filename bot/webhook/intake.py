"""Accepting a job-failure request: size, authentication, JSON, shape, then the durable queue.

Every answer is decided here, in this order, with a one-line message: 411 no Content-Length, 413 over
the cap (from Content-Length, before the body is read), 401 authentication, 400 not JSON, 422 not a
payload we know, 503 the database is down (the sender retries; nothing was accepted), 202 committed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from bot.jobs.model import JobError
from bot.metrics import WEBHOOK_REQUESTS
from bot.store.engine import StoreError, database_error_reason
from bot.store.queue import WorkQueue
from bot.webhook.auth import Headers, Unauthorized, WebhookAuth
from bot.webhook.shapes import NoEvent, to_events

log = logging.getLogger("ncclbot.webhook")

KIND = "job-failed"
RETRY_AFTER_S = 30


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _error(status: int, message: str, **headers: str) -> Reply:
    return Reply(status, {"error": message}, dict(headers))


def validation_message(error: ValidationError) -> str:
    """The first problem as `field.path: message`, and how many more there are."""
    problems = error.errors()
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"]) or "payload"
    more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
    return f"{where}: {first['msg']}{more}"


class JobFailedIntake:
    def __init__(
        self,
        auth: WebhookAuth,
        queue: WorkQueue,
        *,
        max_bytes: int,
        on_enqueued: Callable[[], None] = lambda: None,
    ) -> None:
        self.auth = auth
        self.queue = queue
        self.max_bytes = max_bytes
        self.on_enqueued = on_enqueued

    def accept(
        self,
        headers: Headers,
        content_length: int | None,
        read_body: Callable[[], bytes],
        query: Mapping[str, str],
    ) -> Reply:
        reply = self._accept(headers, content_length, read_body, query)
        WEBHOOK_REQUESTS.labels(status=str(reply.status)).inc()
        if reply.status >= 400:
            log.info("job-failed webhook: %d %s", reply.status, reply.body.get("error"))
        return reply

    def _accept(
        self,
        headers: Headers,
        content_length: int | None,
        read_body: Callable[[], bytes],
        query: Mapping[str, str],
    ) -> Reply:
        if content_length is None:
            return _error(411, "Content-Length is required")
        if content_length > self.max_bytes:
            return _error(
                413,
                f"body of {content_length} bytes is over the {self.max_bytes}-byte cap"
                " (NCCLBOT_WEBHOOK_MAX_BYTES); send log_paths or a pre-computed diagnosis"
                " (ncclbot diagnose --json) instead of inline logs",
            )
        body = read_body()
        try:
            self.auth.process(headers, body)
        except Unauthorized as error:
            return _error(401, str(error))
        except (SQLAlchemyError, StoreError) as error:  # the replay memory is in the database
            return self._unavailable(error)
        try:
            document = json.loads(body)
        except (ValueError, RecursionError) as error:
            return _error(400, f"body is not JSON: {str(error)[:200]}")
        if not isinstance(document, dict):
            return _error(400, f"body must be a JSON object, not {type(document).__name__}")
        try:
            shape, events = to_events(document, query)
        except ValidationError as error:
            return _error(422, validation_message(error))
        except (NoEvent, JobError) as error:
            return _error(422, str(error))
        accepted = []
        remember = self.auth.to_remember(headers)
        try:
            for index, event in enumerate(events):
                enqueued = self.queue.enqueue(
                    KIND,
                    event.key,
                    event.model_dump(mode="json", by_alias=True),
                    group=f"{KIND}/{event.cluster}/{event.job_id}",
                    # With the last event committed, a replay of this very request is refused.
                    remember=remember if index == len(events) - 1 else None,
                )
                accepted.append({"key": event.key, "id": enqueued.id, "duplicate": not enqueued.created})
        except (SQLAlchemyError, StoreError) as error:
            return self._unavailable(error)
        self.on_enqueued()
        return Reply(202, {"accepted": accepted, "shape": shape})

    @staticmethod
    def _unavailable(error: Exception) -> Reply:
        reason = database_error_reason(error)
        log.error("job-failed webhook: cannot queue the event: %s", reason)
        return _error(
            503,
            f"the database is unavailable, nothing was accepted: {reason[:200]}",
            **{"Retry-After": str(RETRY_AFTER_S)},
        )
