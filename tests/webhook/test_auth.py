"""Webhook authentication: a correct HMAC or bearer token passes; everything else is a clear 401."""

from __future__ import annotations

import pytest

from bot.webhook.auth import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    Unauthorized,
    WebhookAuth,
    signature,
    signed_headers,
)

NOW = 1_800_000_000.0
BODY = b'{"cluster": "c1", "job_id": "12"}'


def auth(secret: str | None = "s3cret", bearer: str | None = None) -> WebhookAuth:
    return WebhookAuth(secret=secret, bearer_token=bearer, clock=lambda: NOW)


def test_a_request_signed_now_with_the_secret_passes() -> None:
    assert auth().process(signed_headers("s3cret", BODY, now=NOW), BODY) == "hmac"


@pytest.mark.parametrize("age", [-299, 299])
def test_a_signature_up_to_five_minutes_off_passes(age: int) -> None:
    assert auth().process(signed_headers("s3cret", BODY, now=NOW + age), BODY) == "hmac"


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        (signed_headers("s3cret", BODY, now=NOW - 301), "away from now"),
        (signed_headers("s3cret", BODY, now=NOW + 301), "away from now"),
        (signed_headers("other", BODY, now=NOW), "wrong signature"),
        (signed_headers("s3cret", BODY + b" ", now=NOW), "wrong signature"),
        ({SIGNATURE_HEADER: signature("s3cret", "1800000000", BODY)}, "missing or malformed"),
        ({SIGNATURE_HEADER: "v1=abc", TIMESTAMP_HEADER: "soon"}, "missing or malformed"),
        ({}, "missing X-NCCLBot-Signature"),
        ({"Authorization": "Bearer tok"}, "bearer tokens are not accepted"),
    ],
)
def test_stale_forged_or_missing_signatures_are_refused(headers: dict[str, str], reason: str) -> None:
    with pytest.raises(Unauthorized, match=reason):
        auth().process(headers, BODY)


def test_a_body_signed_for_another_timestamp_is_refused() -> None:
    """The timestamp is inside the MAC: moving it forward to dodge the age check breaks the signature."""
    old = signed_headers("s3cret", BODY, now=NOW - 3600)
    replayed = {TIMESTAMP_HEADER: str(int(NOW)), SIGNATURE_HEADER: old[SIGNATURE_HEADER]}
    with pytest.raises(Unauthorized, match="wrong signature"):
        auth().process(replayed, BODY)


def test_bearer_tokens_pass_only_when_configured_and_equal() -> None:
    both = auth(bearer="am-token")
    assert both.process({"Authorization": "Bearer am-token"}, BODY) == "bearer"
    for header, reason in [("Bearer nope", "wrong bearer token"), ("Basic dXNlcjpwdw==", "must be 'Bearer")]:
        with pytest.raises(Unauthorized, match=reason):
            both.process({"Authorization": header}, BODY)


def test_an_unconfigured_webhook_refuses_everything_and_says_how_to_configure_it() -> None:
    with pytest.raises(Unauthorized, match="NCCLBOT_WEBHOOK_SECRET"):
        auth(secret=None).process(signed_headers("anything", BODY, now=NOW), BODY)
