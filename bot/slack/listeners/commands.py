"""`/nccl diagnose [job-id [cluster]] | help | history [node H | class C] | status | probe <node>`."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot.render import slack_incident, slack_replies, slack_views
from bot.slack.deps import SlackDeps
from bot.slack.middleware import admin_only, audited

COMMAND = "/nccl"
PRIVILEGED = frozenset({"probe"})


def subcommand(body: dict[str, Any]) -> str:
    words = str(body.get("text") or "").split()
    return words[0].lower() if words else "help"


def register(app: App, deps: SlackDeps) -> None:
    privileged = admin_only(
        deps.policy,
        deps.store,
        lambda body: f"{COMMAND} {subcommand(body)}" if subcommand(body) in PRIVILEGED else None,
    )

    @app.command(COMMAND, middleware=[privileged])
    @audited(deps.store, lambda body: f"{COMMAND} {subcommand(body)}")
    def nccl(ack: Ack, body: dict[str, Any], client: WebClient) -> str:
        words = str(body.get("text") or "").split()
        name, args = (words[0].lower(), words[1:]) if words else ("help", [])
        channel, user = str(body.get("channel_id")), str(body.get("user_id"))
        trigger = str(body.get("trigger_id") or "")
        if name == "diagnose" and not args:
            ack()
            client.views_open(
                trigger_id=body["trigger_id"], view=slack_views.diagnose_modal(channel=channel, user=user)
            )
            return "modal opened"
        if name == "diagnose":
            return diagnose_job(deps, ack, channel, user, trigger, args)
        if name == "history":
            return history(deps, ack, args)
        if name == "status":
            text, blocks = slack_replies.status_blocks(deps.store.incidents(open_only=True))
            ack(text=text, blocks=blocks)
            return "ok"
        if name == "probe":
            return probe(deps, ack, channel, user, trigger, args)
        text, blocks = slack_replies.help_blocks()
        ack(text=text, blocks=blocks)
        return "help" if name == "help" else f"unknown subcommand {name[:40]!r}"


def diagnose_job(deps: SlackDeps, ack: Ack, channel: str, user: str, trigger: str, args: list[str]) -> str:
    if deps.jobs is None:
        ack(
            text="Job sources are not configured on this bot, so it cannot fetch a job's logs. "
            "Use `/nccl diagnose` alone to upload them."
        )
        return "job sources not configured"
    job_id, cluster = args[0], (args[1] if len(args) > 1 else None)
    # Committed before the acknowledgement; the task posts the channel's placeholder.
    deps.queue_job(f"job:{channel}:{job_id}:{trigger}", job_id, cluster, channel=channel, user=user)
    ack(text=f"Fetching the logs of job {slack_incident.inline_code(job_id, 80)}…")
    return f"job {job_id[:60]} queued"


def history(deps: SlackDeps, ack: Ack, args: list[str]) -> str:
    node = class_id = None
    if len(args) >= 2 and args[0] == "node":
        node = args[1]
    elif len(args) >= 2 and args[0] == "class":
        class_id = args[1]
    elif args:
        ack(text="Usage: `/nccl history [node <host> | class <id>]`")
        return "usage"
    rows = deps.store.history(days=30, node=node, class_id=class_id)
    scope = f"node {node}" if node else f"class {class_id}" if class_id else "all"
    text, blocks = slack_replies.history_blocks(rows, scope=scope)
    ack(text=text, blocks=blocks)
    return "ok"


def probe(deps: SlackDeps, ack: Ack, channel: str, user: str, trigger: str, args: list[str]) -> str:
    if not args:
        ack(text="Usage: `/nccl probe <node>`")
        return "usage"
    node = args[0]
    deps.queue_probe(f"probe:{trigger}", node, user, incident_id=None, channel=channel)  # before the ack
    ack(
        text=f"Running the probe on {slack_incident.inline_code(node, 120)}; the verdict will be posted here."
    )
    return f"probe {node[:120]} queued"
