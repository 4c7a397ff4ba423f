"""Who may post to the webhook, decided in one place.

Signed senders (the Slurm epilog, scripts) send `X-NCCLBot-Timestamp: <unix seconds>` and
`X-NCCLBot-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>`; a timestamp more than
five minutes away from now is refused, so a captured request cannot be replayed later, and a signed
request that was accepted before is refused too (`replays`: the same bytes sent again within those five
minutes). A sender that retries signs again, and the same job sent anew is accepted and posts nothing new
(the queue's key is the job's). Senders that cannot sign (Alertmanager) send `Authorization: Bearer
<token>`. Comparisons are constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

TIMESTAMP_HEADER = "X-NCCLBot-Timestamp"
SIGNATURE_HEADER = "X-NCCLBot-Signature"
SIGNATURE_VERSION = "v1"
MAX_AGE_S = 300


class Headers(Protocol):
    """Case-insensitive request headers (werkzeug's, or a dict in tests)."""

    def get(self, key: str, /) -> str | None: ...


class Unauthorized(Exception):
    """Answer 401 with this one-line reason."""


class Replays(Protocol):
    """Signed requests already accepted (keys of their timestamp and signature; remembered by the
    intake in the transaction that commits the event)."""

    def seen(self, key: str) -> bool: ...


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The `X-NCCLBot-Signature` value for `body` sent at `timestamp`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"{SIGNATURE_VERSION}={mac.hexdigest()}"


def replay_key(headers: Headers) -> str:
    """What identifies one signed request: its timestamp and signature (which covers the body)."""
    stamp = (headers.get(TIMESTAMP_HEADER) or "").strip()
    sent = (headers.get(SIGNATURE_HEADER) or "").strip()
    return "webhook-request:" + hashlib.sha256(f"{stamp}:{sent}".encode()).hexdigest()


def signed_headers(secret: str, body: bytes, *, now: float | None = None) -> dict[str, str]:
    timestamp = str(int(time.time() if now is None else now))
    return {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature(secret, timestamp, body)}


@dataclass(frozen=True)
class WebhookAuth:
    secret: str | None
    bearer_token: str | None = None
    max_age_s: int = MAX_AGE_S
    clock: Callable[[], float] = field(default=time.time)
    replays: Replays | None = None

    @property
    def configured(self) -> bool:
        return bool(self.secret or self.bearer_token)

    def process(self, headers: Headers, body: bytes) -> str:
        """The method that authenticated the request ("hmac" or "bearer"); raises Unauthorized."""
        if not self.configured:
            raise Unauthorized(
                "the webhook is not configured: set NCCLBOT_WEBHOOK_SECRET or NCCLBOT_WEBHOOK_BEARER_TOKEN"
            )
        sent_signature = headers.get(SIGNATURE_HEADER)
        if sent_signature is not None:
            self._check_signature(headers.get(TIMESTAMP_HEADER), sent_signature, body)
            if self.replays is not None and self.replays.seen(replay_key(headers)):
                raise Unauthorized("replayed request: this signed request was accepted before; sign it anew")
            return "hmac"
        authorization = headers.get("Authorization") or ""
        scheme, _, token = authorization.partition(" ")
        if authorization:
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthorized("Authorization must be 'Bearer <token>'")
            if not self.bearer_token:
                raise Unauthorized(
                    "bearer tokens are not accepted here (NCCLBOT_WEBHOOK_BEARER_TOKEN is not set)"
                )
            if not hmac.compare_digest(token.strip().encode(), self.bearer_token.encode()):
                raise Unauthorized("wrong bearer token")
            return "bearer"
        raise Unauthorized(f"missing {SIGNATURE_HEADER} (or Authorization: Bearer) header")

    def to_remember(self, headers: Headers) -> str | None:
        """The key under which an accepted signed request is remembered (committed with the event, so a
        sender that got a 503 may send the very same request again); None when nothing is remembered."""
        if self.replays is None or headers.get(SIGNATURE_HEADER) is None:
            return None
        return replay_key(headers)

    def _check_signature(self, timestamp: str | None, sent: str, body: bytes) -> None:
        if not self.secret:
            raise Unauthorized("signed requests are not accepted here (NCCLBOT_WEBHOOK_SECRET is not set)")
        if not timestamp or not timestamp.strip().isdigit():
            raise Unauthorized(f"missing or malformed {TIMESTAMP_HEADER} (unix seconds)")
        age = self.clock() - int(timestamp)
        if abs(age) > self.max_age_s:
            raise Unauthorized(
                f"{TIMESTAMP_HEADER} is {abs(age):.0f} s away from now (more than {self.max_age_s} s)"
            )
        expected = signature(self.secret, timestamp.strip(), body)
        if not hmac.compare_digest(sent.strip().encode(), expected.encode()):
            raise Unauthorized("wrong signature")
