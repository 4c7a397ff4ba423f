"""The message for a failed job that could not be diagnosed: which job, how it ended, where it ran,
and why there is no diagnosis (no logs found, unreadable, unusable). A diagnosed job is published as
an incident (bot.render.slack_incident) instead.

Pure functions over plain data. Everything that came from a sender goes through bot.render.slack_text,
so a job name cannot ping anyone or fake a link.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.render.slack_text import FALLBACK_TEXT_LIMIT, HEADER_TEXT_LIMIT, inline_code, mrkdwn, plain_text

NODES_SHOWN = 8


@dataclass(frozen=True, slots=True)
class JobFailureView:
    cluster: str
    job_id: str
    attempt: int
    state: str | None = None
    exit_code: int | None = None
    job_name: str | None = None
    user: str | None = None
    nodes: tuple[str, ...] = ()
    problem: str | None = None


def job_label(view: JobFailureView) -> str:
    """`job 1234 (train-llama) on c1, attempt 2` — the words every message starts with."""
    named = view.job_name and not view.job_id.endswith(view.job_name)  # k8s: the id is namespace/name
    name = f" ({view.job_name})" if named else ""
    attempt = f", attempt {view.attempt}" if view.attempt else ""
    return f"job {view.job_id}{name} on {view.cluster}{attempt}"


def _ended(view: JobFailureView) -> str:
    code = f" (exit {view.exit_code})" if view.exit_code is not None else ""
    return f"{view.state or 'FAILED'}{code}"


def headline(view: JobFailureView) -> str:
    return f"{_ended(view)}: {job_label(view)} — not diagnosed"


def blocks(view: JobFailureView) -> list[dict[str, Any]]:
    facts = [f"*Job:* {mrkdwn(job_label(view), 400)}", f"*State:* {mrkdwn(_ended(view), 100)}"]
    if view.user:
        facts.append(f"*User:* {inline_code(view.user, 80)}")
    if view.nodes:
        more = len(view.nodes) - NODES_SHOWN
        shown = ", ".join(view.nodes[:NODES_SHOWN]) + (f" and {more} more" if more > 0 else "")
        facts.append(f"*Nodes:* {mrkdwn(shown, 800)}")
    out: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": plain_text(headline(view), HEADER_TEXT_LIMIT)},
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(facts)}},
    ]
    if view.problem:
        out.append({"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn(view.problem, 1500)}]})
    return out


def text(view: JobFailureView) -> str:
    """The notification fallback (Slack parses it as mrkdwn too)."""
    return mrkdwn(headline(view), FALLBACK_TEXT_LIMIT)
