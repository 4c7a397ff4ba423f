"""What people do to an incident from its message: resolve, snooze, correct the diagnosis, probe the
culprit node, drain it. Each changes the store (which logs the change) and draws the incident's message
again; the front end only routes the button to one of these.

Permission checks and the request audit are the front end's middleware; these functions trust their
caller on who may act.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.render import slack_replies
from bot.render.slack_incident import IncidentView
from bot.render.slack_text import inline_code, prose
from bot.services.hooks import ActionResult, ClusterActions
from bot.services.outlet import Message, MessageRef, Outlet
from bot.services.posting import post_once
from bot.services.publish import incident_message, view_for
from matcher.taxonomy import CLASSES

log = logging.getLogger("ncclbot.services.incidents")

SNOOZE_HOURS = 24


class ActionError(ValueError):
    """A request that cannot be done as asked; `str()` is one line for the person who asked."""


@dataclass(frozen=True, slots=True)
class IncidentActions:
    """The incident use cases bound to one store and outlet (what a front end holds)."""

    store: Any
    outlet: Outlet
    cluster: ClusterActions | None = None

    def view(self, incident_id: int) -> IncidentView:
        return view_for(self._detail(incident_id))

    def message_of(self, incident_id: int) -> MessageRef | None:
        summary = self._detail(incident_id).summary
        if summary.slack_channel and summary.slack_ts:
            return MessageRef(summary.slack_channel, summary.slack_ts)
        return None

    def redraw(self, incident_id: int) -> IncidentView:
        """Draw the incident's message again from the store (after any change)."""
        view = self.view(incident_id)
        ref = self.message_of(incident_id)
        if ref is not None:
            self.outlet.update(ref, incident_message(view))
        return view

    def resolve(self, incident_id: int, who: str, fix: str | None = None) -> IncidentView:
        self._call(self.store.resolve_incident, incident_id, who, fix)
        return self.redraw(incident_id)

    def snooze(self, incident_id: int, who: str, hours: float = SNOOZE_HOURS) -> IncidentView:
        until = datetime.now(UTC) + timedelta(hours=hours)
        self._call(self.store.snooze, incident_id, who, until)
        return self.redraw(incident_id)

    def correct(self, incident_id: int, who: str, corrected_class: str, note: str | None) -> IncidentView:
        """Wrong diagnosis: store the right class and the note; the message shows the correction."""
        if corrected_class not in CLASSES:
            raise ActionError(f"{corrected_class!r} is not a class of the taxonomy")
        current = self._detail(incident_id).summary.class_id
        self._call(
            self.store.record_feedback,
            incident_id,
            who,
            correct=corrected_class == current,
            corrected_class=None if corrected_class == current else corrected_class,
            note=note,
        )
        return self.redraw(incident_id)

    def probe(
        self,
        incident_id: int | None,
        node: str,
        who: str,
        run: Callable[[str], dict[str, Any]],
        *,
        channel: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Run `run(node)` (the probe, returning its JSON result) and post the verdict and busbw table in
        the incident's thread (or in `channel` for `/nccl probe`); with `key`, posted once however often
        this is retried."""
        result = run(node)
        title, blocks = slack_replies.probe_blocks(result, node=node, requested_by=who)
        message = Message(text=title, blocks=tuple(blocks))
        where = self.message_of(incident_id) if incident_id is not None else None
        target, thread = (where.channel, where) if where is not None else (channel, None)
        if target is not None and key is not None:
            post_once(self.outlet, self.store, f"{key}:verdict", target, message, thread=thread)
        elif target is not None:
            self.outlet.post(target, message, thread=thread)
        self.store.audit(
            who, "probe", incident_id=incident_id, detail={"node": node, "verdict": result.get("verdict")}
        )
        return result

    def drain(self, incident_id: int | None, node: str, who: str) -> ActionResult:
        """Drain through the cluster actions of bot.jobs; says so when none are configured."""
        if self.cluster is None:
            return ActionResult(ok=False, message="Drain is not configured on this bot (no cluster actions).")
        class_id = self._detail(incident_id).summary.class_id if incident_id is not None else "manual"
        cluster = self._detail(incident_id).summary.cluster if incident_id is not None else None
        reason = f"ncclbot #{incident_id}: {class_id}"
        result = self.cluster.drain(node, reason=reason, cluster=cluster, actor=who)
        self.store.audit(who, "drain", incident_id=incident_id, detail={"node": node, "ok": result.ok})
        where = self.message_of(incident_id) if incident_id is not None else None
        if where is not None:
            verb = "drained" if result.ok else "could not drain"
            line = f"{inline_code(node, 120)} {verb}: {prose(result.message, 1000)}"
            self.outlet.post(where.channel, Message(text=line), thread=where)
        return result

    def requeue(self, incident_id: int | None, job_id: str, node: str, who: str) -> ActionResult:
        """Requeue the incident's job away from `node` through the cluster actions of bot.jobs."""
        if self.cluster is None:
            return ActionResult(
                ok=False, message="Requeue is not configured on this bot (no cluster actions)."
            )
        cluster = self._detail(incident_id).summary.cluster if incident_id is not None else None
        result = self.cluster.requeue(job_id, exclude=[node], cluster=cluster, actor=who)
        where = self.message_of(incident_id) if incident_id is not None else None
        if where is not None:
            verb = f"requeued without {inline_code(node, 120)}" if result.ok else "could not be requeued"
            line = f"Job {inline_code(job_id, 120)} {verb}: {prose(result.message, 1000)}"
            self.outlet.post(where.channel, Message(text=line), thread=where)
        return result

    def _detail(self, incident_id: int | None) -> Any:
        if incident_id is None:
            raise ActionError("this message has no stored incident")
        return self._call(self.store.incident_detail, incident_id)

    @staticmethod
    def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from bot.store import StoreError

        try:
            return function(*args, **kwargs)
        except StoreError as error:
            raise ActionError(str(error)) from error
