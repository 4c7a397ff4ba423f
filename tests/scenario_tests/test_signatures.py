"""Slack's request signing, checked by the server: only correctly signed, fresh requests get in."""

from __future__ import annotations

import time

from tests.fakes.slack_api import wait_idle
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import SlackApp


def test_correctly_signed_command_is_answered(slack_app: SlackApp) -> None:
    reply = send.command(slack_app.url, "help", channel=slack_app.channel())
    assert reply.status == 200
    assert "/nccl diagnose" in reply.body.decode()


def test_wrong_signature_is_refused_with_401(slack_app: SlackApp) -> None:
    before = len(slack_app.slack.calls)
    reply = send.command(slack_app.url, "status", channel=slack_app.channel(), secret="not-the-secret")
    assert reply.status == 401
    wait_idle(slack_app.slack, quiet=0.3)
    assert len(slack_app.slack.calls) == before  # nothing reached Slack


def test_missing_signature_is_refused_with_401(slack_app: SlackApp) -> None:
    assert send.command(slack_app.url, "status", channel=slack_app.channel(), secret=None).status == 401


def test_timestamp_older_than_five_minutes_is_refused_with_401(slack_app: SlackApp) -> None:
    stale = int(time.time()) - 5 * 60 - 30
    assert send.command(slack_app.url, "help", channel=slack_app.channel(), timestamp=stale).status == 401
    fresh = int(time.time()) - 60
    assert send.command(slack_app.url, "help", channel=slack_app.channel(), timestamp=fresh).status == 200


def test_tampered_body_is_refused_with_401(slack_app: SlackApp) -> None:
    body = b"command=%2Fnccl&text=help&channel_id=C1&user_id=U1"
    stamp = int(time.time())
    headers = {"X-Slack-Request-Timestamp": str(stamp), "X-Slack-Signature": send.signature(body, stamp)}
    reply = send.post(
        slack_app.url, body + b"&extra=1", "application/x-www-form-urlencoded", secret=None, headers=headers
    )
    assert reply.status == 401


def test_oversized_body_is_refused_before_it_is_read(slack_app: SlackApp) -> None:
    reply = send.post(slack_app.url, b"x" * (2 << 20), "application/json")
    assert reply.status == 413
