"""Publishing a diagnosis: one top-level message per incident, edited in place; details, repeats and
probe results in its thread. The Slack front end and the job-failure webhook both call
`publish_diagnosis`; the outlet is injected, so this runs the same against Slack or an InMemoryOutlet.

Rules
- A new incident gets a top-level message (a top-level placeholder becomes it), then the evidence and
  runbook steps in its thread (a full report file too when they do not fit a message).
- Another diagnosis of the same job, or of the same incident, edits that message.
- A repeat of the same fingerprint posts "seen again" in the incident's thread and bumps its counter;
  notes go out in the order the occurrences were recorded, each once, even after an outage.
- A placeholder posted elsewhere (in the asker's thread) becomes a one-line result that links the
  incident's message.
Each post goes through `post_once` with an idempotency key, so a retried publication (a worker died, Slack
was down) does not post twice.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import runbooks
from bot.render import slack_incident as render
from bot.render.slack_incident import Correction, IncidentView
from bot.services.diagnose import DiagnosisOutcome
from bot.services.outlet import FileUpload, Message, MessageRef, Outlet
from bot.services.posting import post_once

# Posts for one incident are serialised (two diagnoses of a new incident arriving together must not
# both post a top-level message). Striped locks keep this bounded.
_LOCKS = tuple(threading.Lock() for _ in range(64))


@dataclass(frozen=True, slots=True)
class Placeholder:
    """The message the front end posted while reading. A top-level one becomes the incident message."""

    ref: MessageRef
    top_level: bool


@dataclass(frozen=True, slots=True)
class Published:
    message: MessageRef  # the incident's top-level message
    view: IncidentView
    new_message: bool  # a top-level message was posted (or a placeholder became one)
    repeat: bool  # the fingerprint came back: a "seen again" went into the thread


def _lock(incident_id: int | None) -> threading.Lock:
    return _LOCKS[(incident_id or 0) % len(_LOCKS)]


def view_for(detail: Any, *, job: str | None = None) -> IncidentView:
    """An IncidentView from the store's IncidentDetail (bot.store.records)."""
    summary = detail.summary
    document = detail.document or {"diagnoses": [{"class": summary.class_id, "title": summary.class_id}]}
    class_id = str((document.get("diagnoses") or [{}])[0].get("class", summary.class_id))
    feedback = detail.feedback
    correction = None
    if feedback is not None and not feedback.correct:
        correction = Correction(
            user=feedback.user, corrected_class=feedback.corrected_class, note=feedback.note
        )
    first_link = render.archive_link(*detail.first_message) if detail.first_message else None
    return IncidentView(
        document=document,
        runbook=runbooks.render_for(class_id, document.get("facts") or {}),
        incident_id=summary.id,
        status=summary.status,
        occurrences=summary.occurrences,
        recurrence=detail.recurrence_line,
        first_link=first_link,
        job=job or detail.job_id,
        cluster=summary.cluster,
        correction=correction,
        resolved_by=summary.resolved_by,
        snoozed_until=summary.snoozed_until,
    )


def view_of_outcome(outcome: DiagnosisOutcome, *, job: str | None = None) -> IncidentView:
    """For a diagnosis that could not be stored: the message without incident-specific state."""
    document = outcome.diagnosis.to_json()
    document["facts"] = dict(outcome.diagnosis.facts)
    return IncidentView(document=document, runbook=outcome.runbook, job=job)


def incident_message(view: IncidentView) -> Message:
    return Message(text=render.headline_text(view), blocks=tuple(render.incident_blocks(view)))


def details_message(view: IncidentView) -> Message:
    blocks, cut = render.details_blocks(view)
    files: tuple[FileUpload, ...] = ()
    if cut:
        report = render.full_report(view).encode()
        name = f"ncclbot-incident-{view.incident_id or 'report'}.txt"
        files = (FileUpload(filename=name, content=report, title="Full diagnosis report"),)
    return Message(text="Evidence and runbook steps", blocks=tuple(blocks), files=files)


def publish_diagnosis(
    outlet: Outlet,
    store: Any | None,
    channel: str,
    outcome: DiagnosisOutcome,
    *,
    job: str | None = None,
    placeholder: Placeholder | None = None,
    edit: MessageRef | None = None,
) -> Published:
    """Post or update the incident message for `outcome` (see the module's rules).

    `store` is the open Store the outcome was recorded in (None, or an outcome without an incident,
    posts a message without incident buttons). `edit` names a message this diagnosis must replace
    (a re-run with more files)."""
    record = outcome.incident
    if store is None or record is None:
        return _publish_unstored(outlet, channel, outcome, job=job, placeholder=placeholder, edit=edit)
    with _lock(record.id):
        detail = store.incident_detail(record.id)
        view = view_for(detail, job=job)
        own = (
            MessageRef(detail.summary.slack_channel, detail.summary.slack_ts)
            if detail.summary.slack_ts
            else None
        )
        target = edit or own
        if target is None and detail.job_id:
            earlier = store.message_for_job(detail.job_id, detail.summary.cluster)
            target = MessageRef(*earlier) if earlier else None
        # A re-run with more files (`edit`, `refined`) is the same failure seen better, not a recurrence.
        notes = [] if edit is not None or record.refined else store.repeat_notes(record.id)
        repeat = any(note.occurrence_id == record.occurrence_id for note in notes)

        if target is not None:
            outlet.update(target, incident_message(view))
            if own != target:
                store.set_slack_message(record.id, target.channel, target.ts)
            if own != target or record.duplicate:  # a retried publication may have stopped before them
                _post_details(outlet, store, target, view)
            _post_repeat_notes(outlet, store, target, view, notes, this=record.occurrence_id, job=job)
            _finish_placeholder(outlet, placeholder, target, view)
            return Published(message=target, view=view, new_message=False, repeat=repeat)

        if placeholder is not None and placeholder.top_level:
            message = placeholder.ref
            outlet.update(message, incident_message(view))
        else:
            message = post_once(outlet, store, f"incident:{record.id}", channel, incident_message(view))
        store.set_slack_message(record.id, message.channel, message.ts)
        _post_details(outlet, store, message, view)
        _post_repeat_notes(outlet, store, message, view, notes, this=record.occurrence_id, job=job)
        _finish_placeholder(outlet, placeholder, message, view)
        return Published(message=message, view=view, new_message=True, repeat=repeat)


def _post_repeat_notes(
    outlet: Outlet,
    store: Any,
    message: MessageRef,
    view: IncidentView,
    notes: list[Any],
    *,
    this: int,
    job: str | None,
) -> None:
    """A "seen again" note per repeat occurrence, oldest first, each once (keyed by its occurrence).

    Every publication posts the notes still missing, not only its own: when Slack was down, or a
    retried diagnosis recorded nothing new, notes still appear, and in the order the occurrences were
    recorded, whichever publication gets through first."""
    for note in notes:
        shown_job = job if note.occurrence_id == this else note.job_id
        blocks = render.repeat_blocks(view, job=shown_job, ordinal=note.ordinal)
        post_once(
            outlet,
            store,
            f"occurrence:{note.occurrence_id}",
            message.channel,
            Message(text="Seen again", blocks=tuple(blocks)),
            thread=message,
        )


def _post_details(outlet: Outlet, store: Any | None, message: MessageRef, view: IncidentView) -> None:
    key = f"incident:{view.incident_id}:details:{message.ts}"
    if store is None:
        outlet.post(message.channel, details_message(view), thread=message, key=key)
    else:
        post_once(outlet, store, key, message.channel, details_message(view), thread=message)


def _finish_placeholder(
    outlet: Outlet, placeholder: Placeholder | None, message: MessageRef, view: IncidentView
) -> None:
    if placeholder is None or placeholder.ref == message:
        return
    text, blocks = render.result_line(view, render.archive_link(message.channel, message.ts))
    outlet.update(placeholder.ref, Message(text=text, blocks=tuple(blocks)))


def _publish_unstored(
    outlet: Outlet,
    channel: str,
    outcome: DiagnosisOutcome,
    *,
    job: str | None,
    placeholder: Placeholder | None,
    edit: MessageRef | None,
) -> Published:
    view = view_of_outcome(outcome, job=job)
    message = incident_message(view)
    if outcome.store_warning:
        warning = render.problem(outcome.store_warning)[1]
        message = Message(text=message.text, blocks=message.blocks + tuple(warning))
    target = edit or (placeholder.ref if placeholder is not None else None)
    if target is not None:
        outlet.update(target, message)
    else:
        target = outlet.post(channel, message, key=f"digest:{outcome.input_digest}")
    _post_details(outlet, None, target, view)
    return Published(message=target, view=view, new_message=edit is None, repeat=False)
