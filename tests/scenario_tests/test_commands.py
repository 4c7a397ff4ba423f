"""`/nccl` over HTTP: help, status, history, the diagnose modal and its submission, job ids without
job sources, and the admin-only probe (a real gloo allreduce on this machine)."""

from __future__ import annotations

import json

from tests.fakes.slack_api import blocks_text, eventually
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import ADMIN, SlackApp
from tests.scenario_tests.flows import incident_messages, new_incident
from tests.scenario_tests.logs import next_culprit, oom_log


def test_help_lists_every_subcommand(slack_app: SlackApp) -> None:
    reply = send.command(slack_app.url, "help", channel=slack_app.channel())
    shown = reply.shown()
    for sub in ("diagnose", "history", "status", "probe", "help"):
        assert f"/nccl {sub}" in shown


def test_status_lists_open_incidents(slack_app: SlackApp) -> None:
    _channel, message, host = new_incident(slack_app)
    link = "/p" + message["ts"].replace(".", "")

    def status() -> str:
        # The message is in Slack a moment before the store records it (the link): ask again until then.
        shown = send.command(slack_app.url, "status", channel=slack_app.channel()).shown()
        return shown if link in shown else ""

    shown = eventually(status)
    assert host in shown and "cuda/oom" in shown  # each incident links its message


def test_history_of_a_node(slack_app: SlackApp) -> None:
    _channel, _message, host = new_incident(slack_app)
    reply = send.command(slack_app.url, f"history node {host}", channel=slack_app.channel())
    shown = reply.shown()
    assert "1 occurrence" in shown and host in shown
    other = send.command(slack_app.url, "history class hardware/gpu-xid", channel=slack_app.channel())
    assert host not in other.shown()


def test_diagnose_alone_opens_the_upload_modal(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    reply = send.command(slack_app.url, "diagnose", channel=channel, trigger="1337.42.abcdef")
    assert reply.status == 200
    opened = eventually(
        lambda: [c for c in slack_app.slack.calls_to("views.open") if channel in json.dumps(c.params)]
    )
    view = (
        json.loads(opened[0].params["view"])
        if isinstance(opened[0].params["view"], str)
        else opened[0].params["view"]
    )
    assert opened[0].params["trigger_id"] == "1337.42.abcdef"
    elements = [block["element"]["type"] for block in view["blocks"] if block["type"] == "input"]
    assert elements == ["file_input", "plain_text_input"]


def test_modal_with_a_file_is_diagnosed_into_a_top_level_message(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    rank, host = next_culprit()
    shared = slack_app.slack.add_file("rank.log", oom_log(rank))
    values = {
        "files": {"files": {"type": "file_input", "files": [shared]}},
        "pasted": {"pasted": {"value": None}},
    }
    payload = send.view_submission(
        "diagnose.modal", values, private_metadata=json.dumps({"channel": channel, "user": "U1"})
    )
    reply = send.interaction(slack_app.url, payload)
    assert reply.status == 200 and reply.body in (b"", b"{}")  # closes the modal
    [message] = eventually(lambda: incident_messages(slack_app, channel))
    assert host in blocks_text(message["blocks"])
    # The placeholder was the top-level message and became the incident message.
    posts = slack_app.slack.calls_to("chat.postMessage")
    first = next(c for c in posts if c.params.get("channel") == channel)
    assert "Reading" in first.params["text"] and "thread_ts" not in first.params


def test_modal_with_a_pasted_log_is_diagnosed(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    rank, _host = next_culprit()
    # What someone pastes: the culprit rank's own lines around the error (a text area holds 3000 chars).
    lines = [line for line in oom_log(rank).decode().splitlines() if f"[rank{rank}]" in line]
    at = next(i for i, line in enumerate(lines) if "OutOfMemoryError" in line)
    pasted = "\n".join(lines[max(0, at - 8) : at + 4])[:2900]
    values = {"files": {"files": {"files": []}}, "pasted": {"pasted": {"value": pasted}}}
    payload = send.view_submission(
        "diagnose.modal", values, private_metadata=json.dumps({"channel": channel})
    )
    assert send.interaction(slack_app.url, payload).status == 200
    [message] = eventually(lambda: incident_messages(slack_app, channel))
    assert "cuda/oom" in blocks_text(message["blocks"])


def test_empty_modal_is_refused_in_the_form(slack_app: SlackApp) -> None:
    values = {"files": {"files": {"files": []}}, "pasted": {"pasted": {"value": ""}}}
    payload = send.view_submission("diagnose.modal", values, private_metadata="{}")
    reply = send.interaction(slack_app.url, payload)
    assert reply.json()["response_action"] == "errors"


def test_a_job_id_is_diagnosed_from_the_logs_its_job_source_finds(slack_app: SlackApp) -> None:
    rank, host = next_culprit()
    folder = slack_app.root / "job-logs" / "gpu-east" / "771204"
    folder.mkdir(parents=True)
    (folder / "train.log").write_bytes(oom_log(rank))
    channel = slack_app.channel()
    reply = send.command(slack_app.url, "diagnose 771204 gpu-east", channel=channel)
    assert (reply.status, reply.shown()) == (200, "Fetching the logs of job `771204`…")
    [message] = eventually(lambda: incident_messages(slack_app, channel), timeout=60)
    assert "cuda/oom" in message["text"] and host in message["text"]
    assert "*Job:* `771204` on `gpu-east`" in json.dumps(message["blocks"])


def test_a_job_its_source_does_not_know_is_said_in_the_placeholder(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    reply = send.command(slack_app.url, "diagnose 771299 gpu-east", channel=channel)
    assert reply.status == 200
    [edited] = eventually(
        lambda: [c for c in slack_app.slack.calls_to("chat.update") if c.params.get("channel") == channel]
    )
    assert "no logs for job 771299 at" in edited.params["text"]


def test_probe_by_a_non_admin_is_refused_ephemerally(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    reply = send.command(slack_app.url, "probe localhost", channel=channel, user="UNOBODY")
    assert reply.json()["response_type"] == "ephemeral"
    assert "admins" in reply.json()["text"]
    assert slack_app.slack.bot_messages(channel) == []


def test_probe_by_an_admin_posts_the_verdict_and_busbw_table(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    reply = send.command(slack_app.url, "probe localhost", channel=channel, user=ADMIN)
    assert "Running the probe" in reply.shown()
    [verdict] = eventually(lambda: slack_app.slack.bot_messages(channel), timeout=180)
    shown = blocks_text(verdict["blocks"])
    assert "Probe on `localhost`" in shown
    assert "HEALTHY" in shown or "DEGRADED" in shown, shown
    assert "busbw" in shown and "65.5 KB" in shown  # the largest size of the sweep


def test_unknown_subcommand_gets_the_help(slack_app: SlackApp) -> None:
    reply = send.command(slack_app.url, "frobnicate", channel=slack_app.channel())
    assert "/nccl diagnose" in reply.shown()
