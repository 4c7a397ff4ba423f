"""The Slack Web API client every part of the app shares.

`base_url` comes from settings (tests point it at a local fake). Retries: 429 waits for Retry-After,
5xx backs off exponentially, connection errors are retried; every failed call is counted in
`ncclbot_slack_api_errors_total` by method and status first.
"""

from __future__ import annotations

from typing import Any

from slack_sdk import WebClient
from slack_sdk.http_retry import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    RetryHandler,
    RetryState,
)
from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse

from bot.metrics import SLACK_API_ERRORS
from bot.settings import Settings

RATE_LIMIT_RETRIES = 3
SERVER_ERROR_RETRIES = 3
CONNECTION_RETRIES = 3
TIMEOUT_S = 30


def method_of(url: str) -> str:
    """`chat.postMessage` from `https://slack.com/api/chat.postMessage?...` (a bounded label value)."""
    tail = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    return tail if "." in tail and len(tail) < 64 else "other"


class CountErrors(RetryHandler):
    """Never retries; counts each failed attempt (it runs before the handlers that do retry)."""

    def __init__(self) -> None:
        super().__init__(max_retry_count=1_000_000)

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        status = str(response.status_code) if response is not None else "connection"
        SLACK_API_ERRORS.labels(method=method_of(request.url), status=status).inc()
        return False


class ServerErrorRetry(RetryHandler):
    """Any 5xx (slack_sdk's own handler covers only 500 and 503), with exponential backoff."""

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and 500 <= response.status_code < 600


def retry_handlers(backoff_s: float = 0.5) -> list[RetryHandler]:
    backoff = BackoffRetryIntervalCalculator(backoff_factor=backoff_s)
    return [
        CountErrors(),
        RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
        ServerErrorRetry(max_retry_count=SERVER_ERROR_RETRIES, interval_calculator=backoff),
        ConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES, interval_calculator=backoff),
    ]


def make_client(settings: Settings, **overrides: Any) -> WebClient:
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    return WebClient(
        token=token,
        base_url=settings.slack_api_url,
        timeout=TIMEOUT_S,
        retry_handlers=retry_handlers(),
        **overrides,
    )
