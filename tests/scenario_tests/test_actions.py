"""The buttons of an incident message, pressed over HTTP: views for the presser, admin-only actions
with refusals, the correction form, and the audit of every press."""

from __future__ import annotations

import json

from sqlalchemy import create_engine, text

from tests.fakes.slack_api import blocks_text, eventually
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import ADMIN, GROUP_ADMIN, SlackApp
from tests.scenario_tests.flows import buttons, incident_messages, new_incident
from tests.scenario_tests.logs import next_culprit, oom_log


def press(slack_app: SlackApp, channel: str, message: dict, action_id: str, user: str = "U1") -> send.Reply:
    button = buttons(message)[action_id]
    payload = send.block_action(
        action_id, json.loads(button["value"]), channel=channel, message_ts=message["ts"], user=user
    )
    return send.interaction(slack_app.url, payload)


def audited(slack_app: SlackApp, action: str, entry: tuple[str, str]) -> bool:
    """Whether (actor, outcome) is in the audit table for `action` (written once the listener returns)."""
    return entry in [(actor, detail["outcome"]) for actor, detail in audit_rows(slack_app, action)]


def audit_rows(slack_app: SlackApp, action: str) -> list[tuple[str, dict]]:
    engine = create_engine(slack_app.database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT actor, detail FROM audit_log WHERE action = :a ORDER BY id"), {"a": action}
            ).all()
    finally:
        engine.dispose()
    return [(actor, json.loads(detail) if isinstance(detail, str) else detail) for actor, detail in rows]


def ephemerals_to(slack_app: SlackApp, user: str, channel: str) -> list[dict]:
    return [
        c.params
        for c in slack_app.slack.calls_to("chat.postEphemeral")
        if c.params.get("user") == user and c.params.get("channel") == channel
    ]


def test_incident_message_has_every_button(slack_app: SlackApp) -> None:
    _channel, message, host = new_incident(slack_app)
    labels = [b["text"]["text"] for b in buttons(message).values()]
    assert labels == [
        "Engineer view",
        "On-call steps",
        f"Run probe on {host}",
        f"Drain {host}",
        "Resolved",
        "Snooze 24 h",
        "Wrong diagnosis",
    ]


def test_engineer_view_is_shown_to_the_presser_only(slack_app: SlackApp) -> None:
    channel, message, _host = new_incident(slack_app)
    assert press(slack_app, channel, message, "incident.engineer").status == 200
    [shown] = eventually(lambda: ephemerals_to(slack_app, "U1", channel))
    assert "Engineer view" in blocks_text(
        json.loads(shown["blocks"]) if isinstance(shown["blocks"], str) else shown["blocks"]
    )


def test_oncall_steps_list_the_runbook(slack_app: SlackApp) -> None:
    channel, message, _host = new_incident(slack_app)
    press(slack_app, channel, message, "incident.oncall")
    [shown] = eventually(lambda: ephemerals_to(slack_app, "U1", channel))
    blocks = shown["blocks"] if isinstance(shown["blocks"], list) else json.loads(shown["blocks"])
    assert "1. " in blocks_text(blocks) and "Verify" in blocks_text(blocks)


def test_resolve_by_a_non_admin_is_refused_and_audited(slack_app: SlackApp) -> None:
    channel, message, _host = new_incident(slack_app)
    assert press(slack_app, channel, message, "incident.resolve", user="UNOBODY").status == 200
    [refusal] = eventually(lambda: ephemerals_to(slack_app, "UNOBODY", channel))
    assert "admins" in refusal["text"]
    assert audited(slack_app, "incident.resolve", ("UNOBODY", "refused: not an admin"))
    [unchanged] = incident_messages(slack_app, channel)
    assert "resolved by" not in blocks_text(unchanged["blocks"])


def test_resolve_by_an_admin_edits_the_message(slack_app: SlackApp) -> None:
    channel, message, _host = new_incident(slack_app)
    press(slack_app, channel, message, "incident.resolve", user=ADMIN)

    def resolved() -> str:
        shown = blocks_text(incident_messages(slack_app, channel)[0]["blocks"])
        return shown if "resolved by" in shown else ""

    shown = eventually(resolved)
    assert f"<@{ADMIN}>" in shown
    assert "Resolved\n" not in shown + "\n"  # the Resolved button is gone
    eventually(lambda: audited(slack_app, "incident.resolve", (ADMIN, "resolved")))


def test_member_of_an_admin_group_may_resolve(slack_app: SlackApp) -> None:
    channel, message, _host = new_incident(slack_app)
    press(slack_app, channel, message, "incident.resolve", user=GROUP_ADMIN)
    eventually(lambda: "resolved by" in blocks_text(incident_messages(slack_app, channel)[0]["blocks"]))
    assert slack_app.slack.calls_to("usergroups.users.list")


def test_snooze_shows_until_when(slack_app: SlackApp) -> None:
    channel, message, _host = new_incident(slack_app)
    press(slack_app, channel, message, "incident.snooze")
    eventually(lambda: "snoozed until" in blocks_text(incident_messages(slack_app, channel)[0]["blocks"]))


def test_drain_without_cluster_actions_says_it_is_not_configured(slack_app: SlackApp) -> None:
    channel, message, _host = new_incident(slack_app)
    press(slack_app, channel, message, "incident.drain", user=ADMIN)
    [told] = eventually(lambda: ephemerals_to(slack_app, ADMIN, channel))
    assert "not configured" in told["text"]


def job_incident(slack_app: SlackApp, job: str) -> tuple[str, dict, str]:
    """An incident diagnosed from a job's logs (`/nccl diagnose <job-id> <cluster>`, directory source)."""
    rank, host = next_culprit()
    folder = slack_app.root / "job-logs" / "gpu-east" / job
    folder.mkdir(parents=True)
    (folder / "train.log").write_bytes(oom_log(rank))
    channel = slack_app.channel()
    send.command(slack_app.url, f"diagnose {job} gpu-east", channel=channel)
    [message] = eventually(lambda: incident_messages(slack_app, channel), timeout=60)
    return channel, message, host


def test_an_incident_of_a_job_offers_to_requeue_it_without_the_culprit_node(slack_app: SlackApp) -> None:
    channel, message, host = job_incident(slack_app, "880001")
    button = buttons(message)["incident.requeue"]
    assert button["text"]["text"] == f"Requeue without {host}"
    assert json.loads(button["value"])["job"] == "880001"
    press(slack_app, channel, message, "incident.requeue", user="UNOBODY")
    eventually(lambda: audited(slack_app, "incident.requeue", ("UNOBODY", "refused: not an admin")))
    press(slack_app, channel, message, "incident.requeue", user=ADMIN)
    [told] = eventually(lambda: ephemerals_to(slack_app, ADMIN, channel))
    assert "Requeue is not configured" in told["text"]


def test_wrong_diagnosis_opens_the_form_and_the_correction_shows_in_the_message(slack_app: SlackApp) -> None:
    channel, message, _host = new_incident(slack_app)
    press(slack_app, channel, message, "incident.wrong")
    [opened] = eventually(
        lambda: [
            c for c in slack_app.slack.calls_to("views.open") if '"feedback.modal"' in json.dumps(c.params)
        ]
    )
    view = (
        opened.params["view"]
        if isinstance(opened.params["view"], dict)
        else json.loads(opened.params["view"])
    )
    options = [o["value"] for o in view["blocks"][1]["element"]["options"]]
    assert "system/host-oom" in options and "unknown" in options
    values = {
        "class": {"class": {"type": "static_select", "selected_option": {"value": "system/host-oom"}}},
        "note": {"note": {"value": "the cgroup OOM killer took it <!channel>"}},
    }
    payload = send.view_submission("feedback.modal", values, private_metadata=view["private_metadata"])
    assert send.interaction(slack_app.url, payload).status == 200

    def corrected() -> str:
        shown = blocks_text(incident_messages(slack_app, channel)[0]["blocks"])
        return shown if "Corrected by" in shown else ""

    shown = eventually(corrected)
    assert "`system/host-oom`" in shown
    assert "&lt;!channel&gt;" in shown and "<!channel>" not in shown  # a note cannot ping anyone


def test_probe_button_posts_the_verdict_in_the_thread(slack_app: SlackApp) -> None:
    channel, message, host = new_incident(slack_app)
    press(slack_app, channel, message, "incident.probe", user=ADMIN)
    # The culprit host is not this machine: the local launcher refuses it and says so in the thread.
    replies = eventually(
        lambda: [
            m
            for m in slack_app.slack.thread(channel, message["ts"])
            if "Probe on" in blocks_text(m.get("blocks", []))
        ],
        timeout=60,
    )
    shown = blocks_text(replies[0]["blocks"])
    assert f"`{host}`" in shown and "FAILED" in shown
    eventually(lambda: audited(slack_app, "incident.probe", (ADMIN, f"probe {host} queued")))
