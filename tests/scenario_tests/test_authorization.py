"""Who may do what, and requests that must not get in twice: Probe, Drain, Requeue (buttons) and `/nccl probe`
by someone who is not an admin are refused and audited; a signed request sent again (a replayed button
press, command or form) is refused, while a fresh press of the same button is taken."""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

from tests.fakes.slack_api import eventually, wait_idle
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import ADMIN, SlackApp
from tests.scenario_tests.flows import buttons, new_incident
from tests.scenario_tests.test_actions import audit_rows, audited, ephemerals_to, press


def replay(slack_app: SlackApp, body: bytes, content_type: str) -> tuple[send.Reply, send.Reply]:
    """The same signed bytes sent twice (same timestamp, same signature)."""
    stamp = int(time.time())
    headers = {"X-Slack-Request-Timestamp": str(stamp), "X-Slack-Signature": send.signature(body, stamp)}
    first = send.post(slack_app.url, body, content_type, secret=None, headers=headers)
    again = send.post(slack_app.url, body, content_type, secret=None, headers=headers)
    return first, again


def test_probe_drain_and_requeue_buttons_by_a_non_admin_are_refused_and_audited(slack_app: SlackApp) -> None:
    channel, message, _host = new_incident(slack_app)
    for action in ("incident.probe", "incident.drain"):
        assert press(slack_app, channel, message, action, user="UINTRUDER").status == 200
        eventually(lambda a=action: audited(slack_app, a, ("UINTRUDER", "refused: not an admin")))
    # Requeue shows on incidents of a known job; the check does not depend on the button being shown.
    value = {**json.loads(buttons(message)["incident.drain"]["value"]), "job": "771204"}
    requeue = send.block_action(
        "incident.requeue", value, channel=channel, message_ts=message["ts"], user="UINTRUDER"
    )
    assert send.interaction(slack_app.url, requeue).status == 200
    eventually(lambda: audited(slack_app, "incident.requeue", ("UINTRUDER", "refused: not an admin")))
    refusals = eventually(lambda: ephemerals_to(slack_app, "UINTRUDER", channel))
    assert len(refusals) == 3 and all("admins" in r["text"] for r in refusals)
    wait_idle(slack_app.slack, quiet=0.5)
    thread = slack_app.slack.thread(channel, message["ts"])
    assert not [m for m in thread if "probe" in m.get("text", "").lower()]  # no probe started


def test_probe_command_by_a_non_admin_is_refused_and_audited(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    reply = send.command(slack_app.url, "probe gpu-node-007", channel=channel, user="UINTRUDER")
    assert reply.status == 200 and "admins" in reply.shown()
    assert audited(slack_app, "/nccl probe", ("UINTRUDER", "refused: not an admin"))


def test_a_replayed_button_press_is_refused(slack_app: SlackApp) -> None:
    channel, message, _host = new_incident(slack_app)
    value = json.loads(buttons(message)["incident.snooze"]["value"])
    payload = send.block_action("incident.snooze", value, channel=channel, message_ts=message["ts"])
    first, again = replay(slack_app, urlencode({"payload": json.dumps(payload)}).encode(), send.FORM)
    assert (first.status, again.status) == (200, 401)
    eventually(lambda: audited(slack_app, "incident.snooze", ("U1", "snoozed 24 h")))
    assert [actor for actor, _detail in audit_rows(slack_app, "incident.snooze")].count("U1") >= 1
    # A fresh press of the same button (a new request, signed anew) is taken.
    fresh = send.block_action("incident.snooze", value, channel=channel, message_ts=message["ts"], user=ADMIN)
    assert send.interaction(slack_app.url, fresh).status == 200
    eventually(lambda: audited(slack_app, "incident.snooze", (ADMIN, "snoozed 24 h")))


def test_a_replayed_slash_command_and_form_are_refused(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    fields = {
        "command": "/nccl",
        "text": "status",
        "channel_id": channel,
        "user_id": "U1",
        "trigger_id": "9.9.9",
    }
    first, again = replay(slack_app, urlencode(fields).encode(), send.FORM)
    assert (first.status, again.status) == (200, 401)
    values = {"pasted": {"pasted": {"value": "a\nb\nc"}}}
    form = send.view_submission("diagnose.modal", values, private_metadata=json.dumps({"channel": channel}))
    first, again = replay(slack_app, urlencode({"payload": json.dumps(form)}).encode(), send.FORM)
    assert (first.status, again.status) == (200, 401)


def test_an_event_sent_again_with_the_same_signature_is_dropped_not_refused(slack_app: SlackApp) -> None:
    """Slack may retry an event at once with the same bytes; it is dropped like any repeated event id."""
    channel = slack_app.channel()
    body = json.dumps(
        send.event_envelope({"type": "app_mention", "channel": channel, "ts": "1.1", "text": "hi"})
    )
    first, again = replay(slack_app, body.encode(), "application/json")
    assert (first.status, again.status) == (200, 200)
    wait_idle(slack_app.slack, quiet=0.5)
    hints = [c for c in slack_app.slack.calls_to("chat.postMessage") if c.params.get("channel") == channel]
    assert len(hints) == 1  # the hint, once
