"""An incident in Slack: the one top-level message (edited in place), the details posted in its thread,
the short line a placeholder becomes, the Engineer / On-call views, and a plain-text full report for when
the details exceed a message.

Input is plain data: the diagnosis document (the `ncclbot diagnose --json` contract, as the store keeps
it) and the filled runbook, plus what the store knows about the incident (`IncidentView`). Everything
from a log passes through `bot.render.slack_text`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import runbooks
from bot.render import slack_blocks as kit
from bot.render.confidence import confidence_word
from bot.render.slack_blocks import Block
from bot.render.slack_text import code_block, inline_code, plain_text, prose
from runbooks.model import RenderedRunbook

EVIDENCE_IN_THREAD = 8
EXCERPT_CHARS = 400
_USER_ID = re.compile(r"^[UW][A-Z0-9]{1,30}$")
_CHANNEL_ID = re.compile(r"^[CDG][A-Z0-9]{1,30}$")


@dataclass(frozen=True, slots=True)
class Correction:
    user: str
    corrected_class: str | None
    note: str | None


@dataclass(frozen=True, slots=True)
class IncidentView:
    """What one incident message shows. `document` is the diagnosis JSON (diagnoses, culprit, symptom,
    stats, facts); `first_link` is the URL of the first occurrence's message, when known."""

    document: dict[str, Any]
    runbook: RenderedRunbook | None
    incident_id: int | None = None
    status: str = "open"
    occurrences: int = 1
    recurrence: str | None = None
    first_link: str | None = None
    job: str | None = None
    cluster: str | None = None
    correction: Correction | None = None
    resolved_by: str | None = None
    snoozed_until: datetime | None = None

    @property
    def primary(self) -> dict[str, Any]:
        diagnoses = self.document.get("diagnoses") or [{}]
        return dict(diagnoses[0])

    @property
    def class_id(self) -> str:
        return str(self.primary.get("class", "unknown"))

    @property
    def culprit(self) -> dict[str, Any] | None:
        culprit = self.document.get("culprit")
        return culprit if isinstance(culprit, dict) else None

    @property
    def culprit_host(self) -> str | None:
        hosts = (self.culprit or {}).get("hosts") or []
        return str(hosts[0]) if hosts else None


def user_mention(user: str | None) -> str:
    """`<@U123>` for a Slack user id (ids come from Slack, not from logs); anything else as code."""
    if user and _USER_ID.match(user):
        return f"<@{user}>"
    return inline_code(user or "someone")


def archive_link(channel: str, ts: str, base: str = "https://slack.com/archives/") -> str | None:
    """Slack's permalink form for a message (opens in the workspace that has it)."""
    if not _CHANNEL_ID.match(channel) or not re.fullmatch(r"\d+\.\d+", ts):
        return None
    return f"{base}{channel}/p{ts.replace('.', '')}"


def culprit_line(view: IncidentView) -> str:
    culprit = view.culprit
    if culprit is None:
        reason = view.document.get("no_culprit_reason")
        return "*Culprit:* none named" + (f" — {prose(str(reason), 600)}" if reason else "")
    ranks = [str(r) for r in culprit.get("ranks") or []]
    hosts = [str(h) for h in culprit.get("hosts") or []]
    where = []
    if ranks:
        where.append(("ranks " if len(ranks) > 1 else "rank ") + inline_code(", ".join(ranks[:8])))
    if hosts:
        where.append("on " + ", ".join(inline_code(h, 120) for h in hosts[:4]))
    reason = prose(str(culprit.get("reason", "")), 800)
    return f"*Culprit:* {' '.join(where) or 'see reason'}" + (f" — {reason}" if reason else "")


def headline_text(view: IncidentView) -> str:
    """The notification fallback: class id, title, culprit host (mrkdwn-safe: Slack parses `text` too)."""
    host = view.culprit_host
    title = prose(plain_text(str(view.primary.get("title", "")), 120))
    return f"{prose(view.class_id, 80)}: {title}" + (f" (culprit {prose(host, 80)})" if host else "")


def incident_blocks(view: IncidentView) -> list[Block]:
    """The top-level message: what broke, who started it, what it means, how often, and the buttons."""
    primary = view.primary
    confidence = float(primary.get("confidence", 0.0))
    title = str(primary.get("title", ""))
    blocks: list[Block] = [kit.header(f"{view.class_id} — {title}")]
    status = ""
    if view.status == "resolved":
        status = f"  ·  :white_check_mark: resolved by {user_mention(view.resolved_by)}"
    elif view.status == "snoozed" and view.snoozed_until is not None:
        status = f"  ·  :zzz: snoozed until {view.snoozed_until.strftime('%Y-%m-%d %H:%M UTC')}"
    blocks.append(
        kit.section(
            f"*Class:* {inline_code(view.class_id)}  ·  *Confidence:* {confidence:.2f} "
            f"({confidence_word(confidence)}){status}\n{culprit_line(view)}"
        )
    )
    if view.runbook is not None:
        blocks.append(kit.section(prose(view.runbook.summaries.executive, 1500)))
    blocks.append(kit.context(*_facts_line(view)))
    if view.correction is not None:
        corrected = view.correction.corrected_class
        what = f"should be {inline_code(corrected)}" if corrected else "marked wrong"
        note = f": {prose(view.correction.note, 600)}" if view.correction.note else ""
        blocks.append(
            kit.context(f":pencil2: Corrected by {user_mention(view.correction.user)} — {what}{note}")
        )
    blocks.append(incident_buttons(view))
    return blocks


def _facts_line(view: IncidentView) -> list[str]:
    items = []
    if view.job:
        job = f"*Job:* {inline_code(view.job, 120)}"
        items.append(job + (f" on {inline_code(view.cluster, 60)}" if view.cluster else ""))
    if view.recurrence:
        line = prose(view.recurrence, 300)
        items.append(f":repeat: {line}" + (f" (<{view.first_link}|first>)" if view.first_link else ""))
    if view.occurrences > 1:
        items.append(f"*Seen* {view.occurrences}× in this incident")
    stats = view.document.get("stats") or {}
    if stats:
        ranks = f", {stats.get('ranks')} ranks" if stats.get("ranks") else ""
        items.append(
            f"read {human_bytes(int(stats.get('bytes', 0)))}{ranks} in {float(stats.get('seconds', 0)):.1f} s"
        )
    if view.incident_id is not None:
        items.append(f"incident #{view.incident_id}")
    return items or ["first sighting"]


def incident_buttons(view: IncidentView) -> Block:
    ref = {"incident": view.incident_id}
    host = view.culprit_host
    buttons = [
        kit.button("Engineer view", kit.ACTION_ENGINEER, ref),
        kit.button("On-call steps", kit.ACTION_ONCALL, ref),
    ]
    if host:
        node = {**ref, "node": host}
        buttons.append(kit.button(f"Run probe on {host}", kit.ACTION_PROBE, node))
        buttons.append(kit.button(f"Drain {host}", kit.ACTION_DRAIN, node, style="danger"))
        if view.job:  # a scheduler job (webhook, /nccl diagnose <job-id>): run it again without the node
            requeue = {**node, "job": view.job}
            buttons.append(kit.button(f"Requeue without {host}", kit.ACTION_REQUEUE, requeue))
    if view.status != "resolved":
        buttons.append(kit.button("Resolved", kit.ACTION_RESOLVE, ref, style="primary"))
        buttons.append(kit.button("Snooze 24 h", kit.ACTION_SNOOZE, ref))
    buttons.append(kit.button("Wrong diagnosis", kit.ACTION_WRONG, ref))
    return kit.actions(*buttons, block_id=f"incident-{view.incident_id}")


def evidence_blocks(document: dict[str, Any], limit: int = EVIDENCE_IN_THREAD) -> list[Block]:
    """`file:line` excerpts of the primary class, each line once."""
    primary = (document.get("diagnoses") or [{}])[0]
    seen: set[tuple[str, int]] = set()
    blocks: list[Block] = []
    for item in primary.get("evidence") or []:
        key = (str(item.get("source")), int(item.get("line", 0)))
        if key in seen:
            continue
        seen.add(key)
        where = inline_code(f"{key[0]}:{key[1]}", 250)
        signature = inline_code(str(item.get("signature", "")), 80)
        blocks.append(
            kit.section(f"{where} {signature}\n{code_block(str(item.get('text', '')), EXCERPT_CHARS)}")
        )
        if len(blocks) >= limit:
            break
    return blocks


def runbook_blocks(runbook: RenderedRunbook, *, oncall: bool = True) -> list[Block]:
    blocks: list[Block] = []
    if oncall:
        blocks.append(kit.section(f"*On call, now*\n{prose(runbook.summaries.oncall, 2500)}"))
    for number, step in enumerate(runbook.steps, 1):
        text = f"*{number}. {prose(step.title, 300)}*"
        if step.command:
            text += "\n" + code_block(step.command, 1500)
        if step.expect:
            text += "\n" + prose(step.expect, 800)
        blocks.append(kit.section(text))
    verify = runbook.verify
    text = f"*Verify:* {prose(verify.title, 300)}"
    if verify.command:
        text += "\n" + code_block(verify.command, 1200)
    blocks.append(kit.section(text))
    return blocks


def details_blocks(view: IncidentView) -> tuple[list[Block], bool]:
    """The thread reply under a new incident: evidence and runbook steps; True when cut to fit (then
    the full report goes along as a file)."""
    blocks: list[Block] = [kit.section("*Evidence*")]
    blocks += evidence_blocks(view.document)
    others = (view.document.get("diagnoses") or [])[1:4]
    if others:
        lines = [f"{inline_code(str(d.get('class')))} ({float(d.get('confidence', 0)):.2f})" for d in others]
        blocks.append(kit.context("*Also considered:* " + ", ".join(lines)))
    blocks += settle_blocks(view.document)
    if view.runbook is not None:
        blocks.append(kit.divider())
        blocks += runbook_blocks(view.runbook)
    shortened = _evidence_shortened(view.document)
    if shortened:
        blocks.append(kit.context("_More evidence than fits here: the full report is attached._"))
    fitted, cut = kit.fit(blocks)
    return fitted, cut or shortened


def settle_blocks(document: dict[str, Any]) -> list[Block]:
    """Under a guess: what would confirm each class it lists, so the reader knows what to add."""
    settle = runbooks.settle_for(document.get("diagnoses") or [])
    if not settle:
        return []
    bullets = "\n".join(f"• {inline_code(s.class_id)}: {prose(s.text, 600)}" for s in settle)
    return [kit.section(f"*What would settle it* (this is a guess; add these and diagnose again)\n{bullets}")]


def _evidence_shortened(document: dict[str, Any]) -> bool:
    """Whether the thread shows less evidence than the diagnosis has (lines left out or cut)."""
    primary = (document.get("diagnoses") or [{}])[0]
    lines = {
        (str(e.get("source")), int(e.get("line", 0))): str(e.get("text", ""))
        for e in primary.get("evidence") or []
    }
    return len(lines) > EVIDENCE_IN_THREAD or any(len(text) > EXCERPT_CHARS - 8 for text in lines.values())


def engineer_blocks(view: IncidentView) -> list[Block]:
    blocks: list[Block] = [kit.header(f"Engineer view — {view.class_id}")]
    if view.runbook is not None:
        blocks.append(kit.section(prose(view.runbook.summaries.engineer)))
    blocks.append(kit.section(culprit_line(view)))
    symptom = view.document.get("symptom")
    if symptom:
        blocks.append(kit.context(f"*Symptom on the healthy ranks:* {inline_code(str(symptom))}"))
    blocks += evidence_blocks(view.document, limit=5)
    if view.runbook is not None and view.runbook.dead_ends:
        dead = "\n".join(
            f"• {prose(d.attempt, 200)} — {prose(d.why, 300)}" for d in view.runbook.dead_ends[:5]
        )
        blocks.append(kit.section(f"*Dead ends*\n{dead}"))
    return kit.fit(blocks)[0]


def oncall_blocks(view: IncidentView) -> list[Block]:
    blocks: list[Block] = [kit.header(f"On-call steps — {view.class_id}")]
    if view.runbook is not None:
        blocks += runbook_blocks(view.runbook)
    else:
        blocks.append(kit.section("No runbook for this class."))
    return kit.fit(blocks)[0]


def repeat_blocks(view: IncidentView, *, job: str | None = None, ordinal: int | None = None) -> list[Block]:
    """Posted in the incident's thread when the same fingerprint comes back (`ordinal`: which
    occurrence this note is for; the incident's count when not given)."""
    what = f"Seen again ({ordinal or view.occurrences}× now)"
    if job:
        what += f" in job {inline_code(job, 120)}"
    line = [what]
    if view.recurrence:
        line.append(prose(view.recurrence, 300))
    return [kit.section(" — ".join(line))]


def result_line(view: IncidentView, link: str | None) -> tuple[str, list[Block]]:
    """What a placeholder turns into once the incident has its own message elsewhere."""
    host = view.culprit_host
    text = f"{inline_code(view.class_id)} {prose(str(view.primary.get('title', '')), 300)}"
    if host:
        text += f" — culprit {inline_code(host, 120)}"
    if link:
        text += f"\n<{link}|Incident #{view.incident_id}>" + (" (repeat)" if view.occurrences > 1 else "")
    return headline_text(view), [kit.section(text)]


def placeholder(
    *, files: int, total_bytes: int, ranks: int | None = None, queued: int = 0
) -> tuple[str, list[Block]]:
    """ "Reading 1.2 GB from 64 ranks…" (the message edited into the result)."""
    what = f"{ranks} ranks" if ranks else f"{files} file" + ("s" if files != 1 else "")
    text = f":hourglass_flowing_sand: Reading {human_bytes(total_bytes)} from {what}…"
    if queued:
        text += f" (queued: {queued} {'diagnosis' if queued == 1 else 'diagnoses'} ahead)"
    return text, [kit.section(text)]


def progress(done_bytes: int, total_bytes: int) -> tuple[str, list[Block]]:
    share = f" ({100 * done_bytes // total_bytes}%)" if total_bytes else ""
    text = f":hourglass_flowing_sand: Reading… {human_bytes(done_bytes)} of {human_bytes(total_bytes)}{share}"
    return text, [kit.section(text)]


def problem(text: str) -> tuple[str, list[Block]]:
    """A clear one-line reply for unusable input (never a traceback)."""
    line = f":warning: {prose(text, 1500)}"
    return line, [kit.section(line)]


def full_report(view: IncidentView) -> str:
    """Plain-text report uploaded as a file when the thread reply had to be cut."""
    from bot.render.runbook_text import render as render_runbook

    primary = view.primary
    confidence = float(primary.get("confidence", 0))
    lines = [f"{view.class_id}  {primary.get('title', '')}  (confidence {confidence:.2f})"]
    culprit = view.culprit
    if culprit:
        lines.append(
            f"Culprit: ranks {culprit.get('ranks')} on {culprit.get('hosts')} — {culprit.get('reason')}"
        )
    if view.recurrence:
        lines.append(f"Recurrence: {view.recurrence}")
    lines.append("")
    lines.append("Evidence")
    for item in primary.get("evidence") or []:
        lines.append(f"  {item.get('source')}:{item.get('line')}  {item.get('text')}")
    for other in (view.document.get("diagnoses") or [])[1:]:
        lines.append(f"Also considered: {other.get('class')} ({float(other.get('confidence', 0)):.2f})")
    settle = runbooks.settle_for(view.document.get("diagnoses") or [])
    if settle:
        lines += ["", "What would settle it (this is a guess)"]
        lines += [f"  {s.class_id}: {s.text}" for s in settle]
    if view.runbook is not None:
        lines += ["", render_runbook(view.runbook, width=100)]
    from bot.render.safe_text import strip_controls

    return strip_controls("\n".join(lines)) + "\n"


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"
