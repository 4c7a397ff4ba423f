"""The message for a failed job: which job, what broke, where, what to do — as text and Block Kit.

Pure functions over plain data. Everything that came from a sender or a log goes through
bot.render.slack_text, so a job name or an evidence line cannot ping anyone or fake a link.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.render.slack_text import (
    FALLBACK_TEXT_LIMIT,
    HEADER_TEXT_LIMIT,
    code_block,
    inline_code,
    mrkdwn,
    plain_text,
)

EVIDENCE_LINES = 3
NODES_SHOWN = 8


@dataclass(frozen=True, slots=True)
class JobFailureView:
    """What the message shows. `class_id` is None when there is no diagnosis (`problem` says why)."""

    cluster: str
    job_id: str
    attempt: int
    state: str | None = None
    exit_code: int | None = None
    job_name: str | None = None
    user: str | None = None
    nodes: tuple[str, ...] = ()
    class_id: str | None = None
    title: str | None = None
    confidence: float | None = None
    culprit_hosts: tuple[str, ...] = ()
    culprit_ranks: tuple[int, ...] = ()
    culprit_reason: str | None = None
    summary: str | None = None
    evidence: tuple[str, ...] = ()
    recurrence: str | None = None
    incident_id: int | None = None
    problem: str | None = None


def job_label(view: JobFailureView) -> str:
    """`job 1234 (train-llama) on cluster c1, attempt 2` — the words every message starts with."""
    named = view.job_name and not view.job_id.endswith(view.job_name)  # k8s: the id is namespace/name
    name = f" ({view.job_name})" if named else ""
    attempt = f", attempt {view.attempt}" if view.attempt else ""
    return f"job {view.job_id}{name} on {view.cluster}{attempt}"


def _outcome(view: JobFailureView) -> str:
    state = view.state or "FAILED"
    code = f" (exit {view.exit_code})" if view.exit_code is not None else ""
    return f"{state}{code}"


def headline(view: JobFailureView) -> str:
    cause = f"{view.class_id}: {view.title}" if view.class_id else "not diagnosed"
    return f"{_outcome(view)}: {job_label(view)} — {cause}"


def _culprit_line(view: JobFailureView) -> str:
    if not view.culprit_hosts and not view.culprit_ranks:
        return "*Culprit:* none named"
    parts = []
    if view.culprit_ranks:
        parts.append("rank " + ", ".join(str(r) for r in view.culprit_ranks[:8]))
    if view.culprit_hosts:
        parts.append("on " + ", ".join(inline_code(h, 80) for h in view.culprit_hosts[:4]))
    reason = f" — {mrkdwn(view.culprit_reason, 500)}" if view.culprit_reason else ""
    return "*Culprit:* " + " ".join(parts) + reason


def blocks(view: JobFailureView) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": plain_text(headline(view), HEADER_TEXT_LIMIT)},
        }
    ]
    nodes = ", ".join(view.nodes[:NODES_SHOWN]) + (
        f" and {len(view.nodes) - NODES_SHOWN} more" if len(view.nodes) > NODES_SHOWN else ""
    )
    facts = [f"*Job:* {mrkdwn(job_label(view), 400)}", f"*State:* {mrkdwn(_outcome(view), 100)}"]
    if view.user:
        facts.append(f"*User:* {inline_code(view.user, 80)}")
    if nodes:
        facts.append(f"*Nodes:* {mrkdwn(nodes, 800)}")
    out.append({"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(facts)}})
    if view.class_id:
        confidence = f" (confidence {view.confidence:.2f})" if view.confidence is not None else ""
        lines = [
            f"*Cause:* {inline_code(view.class_id, 80)} {mrkdwn(view.title or '', 300)}{confidence}",
            _culprit_line(view),
        ]
        if view.summary:
            lines.append(mrkdwn(view.summary, 1200))
        if view.recurrence:
            lines.append(f"_{mrkdwn(view.recurrence, 300)}_")
        out.append({"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}})
    if view.evidence:
        out.append(
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": code_block("\n".join(view.evidence[:EVIDENCE_LINES]), 2000),
                },
            }
        )
    if view.problem:
        out.append({"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn(view.problem, 1500)}]})
    return out


def text(view: JobFailureView) -> str:
    """The notification fallback: the headline and the culprit, escaped."""
    culprit = f"; culprit {', '.join(view.culprit_hosts[:3])}" if view.culprit_hosts else ""
    return mrkdwn(headline(view) + culprit, FALLBACK_TEXT_LIMIT)
