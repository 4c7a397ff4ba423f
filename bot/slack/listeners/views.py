"""Modal submissions: the diagnose form (files + pasted log) and the wrong-diagnosis form."""

from __future__ import annotations

import json
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot.render import slack_blocks as kit
from bot.services.incidents import ActionError
from bot.slack.deps import SlackDeps
from bot.slack.files import SharedFile
from bot.slack.middleware import actor_of, audited


def _value(view: dict[str, Any], block_action: tuple[str, str]) -> dict[str, Any]:
    """The state of one input of a submitted view ({} when it is missing or not an object)."""
    found: Any = view
    for key in ("state", "values", *block_action):
        found = found.get(key) if isinstance(found, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def _metadata(view: dict[str, Any]) -> dict[str, Any]:
    try:
        data = json.loads(view.get("private_metadata") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def register(app: App, deps: SlackDeps) -> None:
    @app.view(kit.VIEW_DIAGNOSE)
    @audited(deps.store, "modal diagnose")
    def diagnose_submitted(ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> str:
        files = [
            SharedFile.from_payload(f)
            for f in _value(view, kit.INPUT_FILES).get("files") or []
            if f.get("id")
        ]
        pasted = (_value(view, kit.INPUT_PASTED).get("value") or "").strip() or None
        if not files and pasted is None:
            ack(response_action="errors", errors={kit.INPUT_FILES[0]: "Attach a log file or paste a log."})
            return "empty form"
        meta = _metadata(view)
        user = actor_of(body)
        channel = str(meta.get("channel") or user)
        key = f"view:{view.get('id')}:{view.get('hash') or body.get('trigger_id')}"
        deps.accept(key, channel, thread=None, user=user, files=files, pasted=pasted)  # before the ack
        ack()
        return "queued"

    @app.view(kit.VIEW_FEEDBACK)
    @audited(deps.store, "feedback")
    def feedback_submitted(ack: Ack, body: dict[str, Any], view: dict[str, Any], client: WebClient) -> str:
        meta = _metadata(view)
        option = _value(view, kit.INPUT_CLASS).get("selected_option")
        chosen = option.get("value") if isinstance(option, dict) else None
        note = _value(view, kit.INPUT_NOTE).get("value")
        incident = meta.get("incident")
        if not isinstance(incident, int) or not chosen:
            ack(response_action="errors", errors={kit.INPUT_CLASS[0]: "Choose the right class."})
            return "incomplete"
        ack()
        try:
            deps.actions.correct(incident, str(actor_of(body)), str(chosen), note)
        except ActionError as error:
            return f"failed: {error}"
        return f"corrected to {chosen}"
