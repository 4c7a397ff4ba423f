"""The buttons of an incident message. Probe, Drain, Requeue and Resolve are admin-only (middleware); every
press is audited (decorator); the work itself is in bot.services.incidents."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot.render import slack_blocks as kit
from bot.render import slack_incident, slack_views
from bot.render.slack_text import prose
from bot.services.incidents import ActionError
from bot.slack.deps import SlackDeps
from bot.slack.middleware import action_value, actor_of, admin_only, audited, channel_of
from matcher.taxonomy import CLASSES


def _where(body: dict[str, Any]) -> tuple[str, str | None]:
    container = body.get("container")
    ts = container.get("message_ts") if isinstance(container, dict) else None
    return str(channel_of(body)), (str(ts) if ts else None)


def _incident(body: dict[str, Any]) -> int:
    incident = action_value(body).get("incident")
    if not isinstance(incident, int):
        raise ActionError("this message has no stored incident")
    return incident


def _node(body: dict[str, Any]) -> str:
    node = action_value(body).get("node")
    if not isinstance(node, str) or not node:
        raise ActionError("this incident names no node")
    return node


def _tell(
    client: WebClient, body: dict[str, Any], text: str, blocks: list[dict[str, Any]] | None = None
) -> None:
    """An ephemeral answer to the person who pressed the button."""
    channel, _ts = _where(body)
    user = actor_of(body)
    if user:
        client.chat_postEphemeral(channel=channel, user=user, text=text, blocks=blocks or None)


def register(app: App, deps: SlackDeps) -> None:
    def admin(action_id: str) -> list[Callable[..., Any]]:
        return [admin_only(deps.policy, deps.store, lambda _body: action_id)]

    def handled(listener: Callable[..., str], *, ack_after: bool = False) -> Callable[..., str]:
        """ActionError becomes an ephemeral one-liner (and the audited outcome). `ack_after`: the
        listener commits work to the queue, acknowledged only once that is done."""

        def run(ack: Ack, body: dict[str, Any], client: WebClient) -> str:
            if not ack_after:
                ack()
            try:
                return listener(body, client)
            except ActionError as error:
                _tell(client, body, f":warning: {prose(str(error), 500)}")
                return f"failed: {error}"
            finally:
                if ack_after:
                    ack()

        return run

    def on(
        action_id: str, middleware: list[Callable[..., Any]] | None = None, *, ack_after: bool = False
    ) -> Callable[..., Any]:
        def decorate(listener: Callable[..., str]) -> Callable[..., str]:
            app.action(action_id, middleware=middleware or [])(
                audited(deps.store, action_id)(handled(listener, ack_after=ack_after))
            )
            return listener

        return decorate

    @on(kit.ACTION_ENGINEER)
    def engineer(body: dict[str, Any], client: WebClient) -> str:
        view = deps.actions.view(_incident(body))
        _tell(client, body, f"Engineer view of {view.class_id}", slack_incident.engineer_blocks(view))
        return "shown"

    @on(kit.ACTION_ONCALL)
    def oncall(body: dict[str, Any], client: WebClient) -> str:
        view = deps.actions.view(_incident(body))
        _tell(client, body, f"On-call steps for {view.class_id}", slack_incident.oncall_blocks(view))
        return "shown"

    @on(kit.ACTION_PROBE, admin(kit.ACTION_PROBE), ack_after=True)
    def probe(body: dict[str, Any], client: WebClient) -> str:
        incident, node = _incident(body), _node(body)
        key = f"probe:{body.get('trigger_id') or (body.get('actions') or [{}])[0].get('action_ts')}"
        deps.queue_probe(key, node, str(actor_of(body)), incident_id=incident, channel=None)
        return f"probe {node[:120]} queued"

    @on(kit.ACTION_DRAIN, admin(kit.ACTION_DRAIN))
    def drain(body: dict[str, Any], client: WebClient) -> str:
        result = deps.actions.drain(_incident(body), _node(body), str(actor_of(body)))
        if not result.ok:
            _tell(client, body, prose(result.message, 500))
        return ("drained: " if result.ok else "not drained: ") + result.message

    @on(kit.ACTION_REQUEUE, admin(kit.ACTION_REQUEUE))
    def requeue(body: dict[str, Any], client: WebClient) -> str:
        job = action_value(body).get("job")
        if not isinstance(job, str) or not job:
            raise ActionError("this incident names no job")
        result = deps.actions.requeue(_incident(body), job, _node(body), str(actor_of(body)))
        if not result.ok:
            _tell(client, body, prose(result.message, 500))
        return ("requeued: " if result.ok else "not requeued: ") + result.message

    @on(kit.ACTION_RESOLVE, admin(kit.ACTION_RESOLVE))
    def resolve(body: dict[str, Any], client: WebClient) -> str:
        deps.actions.resolve(_incident(body), str(actor_of(body)))
        return "resolved"

    @on(kit.ACTION_SNOOZE)
    def snooze(body: dict[str, Any], client: WebClient) -> str:
        deps.actions.snooze(_incident(body), str(actor_of(body)), hours=deps.settings.snooze_hours)
        return f"snoozed {deps.settings.snooze_hours:g} h"

    @on(kit.ACTION_WRONG)
    def wrong(body: dict[str, Any], client: WebClient) -> str:
        incident = _incident(body)
        view = deps.actions.view(incident)
        channel, ts = _where(body)
        modal = slack_views.feedback_modal(
            incident_id=incident, current_class=view.class_id, classes=CLASSES, channel=channel, ts=ts or ""
        )
        client.views_open(trigger_id=body["trigger_id"], view=modal)
        return "form opened"
