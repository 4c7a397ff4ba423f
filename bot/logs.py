"""Server logs: lines for people or JSON objects for log collectors, secrets redacted from both, and one
request id on every record written while a request or a work item is handled.

The request id lives in a context variable: the HTTP layer sets it per request (bot.server.ops), a queue
worker sets it per work item (`request_scope(item's id)`), and every record logged meanwhile, in any
module, carries it. A new thread starts with an empty context: hand work to threads through
`ContextThreadPoolExecutor` (or pass `current_request_id()` along) to keep the id.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO, TypeVar

from matcher.analysis.redact import MASK, redact

REQUEST_ID: ContextVar[str | None] = ContextVar("ncclbot_request_id", default=None)
T = TypeVar("T")

# What a caller-supplied id (an `X-Request-Id` header, a queue item's stored id) may look like: it is
# copied into every log line, so nothing that could forge a line or a JSON field.
_ACCEPTABLE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

# The attributes every LogRecord has; anything else on a record came from `extra=` and is logged as a field.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "request_id",
    "taskName",
}


def new_request_id() -> str:
    return uuid.uuid4().hex[:16]


def acceptable_request_id(value: str | None) -> str | None:
    """`value` when it is safe to log as a request id, else None."""
    return value if value and _ACCEPTABLE_ID.fullmatch(value) else None


def current_request_id() -> str | None:
    return REQUEST_ID.get()


@contextmanager
def request_scope(request_id: str | None = None) -> Iterator[str]:
    """Every record logged inside carries `request_id` (a new one when none or an unsafe one is given)."""
    chosen = acceptable_request_id(request_id) or new_request_id()
    token = REQUEST_ID.set(chosen)
    try:
        yield chosen
    finally:
        REQUEST_ID.reset(token)


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A thread pool whose tasks run in a copy of the submitter's context, request id included (a plain
    pool starts every task with an empty one): for listeners that run after the request thread acked."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        context = contextvars.copy_context()
        return super().submit(context.run, fn, *args, **kwargs)


class RequestIdFilter(logging.Filter):
    """Stamps the current request id on each record (a handler filter, so records of every logger that
    reach the handler get it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class Redactor:
    """Masks credentials in log text: the configured secrets themselves, wherever they appear, and
    everything matcher.analysis.redact recognises (tokens, passwords in URLs, `*_TOKEN=` assignments)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret containing another is masked whole. Very short values would mask
        # ordinary words; no real secret is that short.
        self.secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return redact(text)


class TextFormatter(logging.Formatter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(request_suffix)s: %(message)s")
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        record.request_suffix = f" [{request_id}]" if request_id else ""
        return self.redactor(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, message, request_id, exception, and the
    record's `extra=` fields."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": self.redactor(record.getMessage()),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            document["request_id"] = request_id
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and key != "request_suffix" and not key.startswith("_"):
                document[key] = self.redactor(value) if isinstance(value, str) else value
        if record.exc_info:
            document["exception"] = self.redactor(self.formatException(record.exc_info))
        return json.dumps(document, default=str, ensure_ascii=False)


def configure(
    log_format: str = "text",
    level: str = "INFO",
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send every log record to `stream` (stderr) in `log_format`, redacted; returns the handler."""
    redactor = Redactor(secrets)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(redactor) if log_format == "json" else TextFormatter(redactor))
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
