"""Terminal rendering of a Diagnosis for a person at 3 a.m.: headline, culprit, evidence, what to do.

Log text is untrusted: it is always added as plain `Text`, never as rich markup, so a line such as
`[bold red]` or an escape sequence in a log cannot restyle or corrupt the terminal.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

import runbooks
from bot.render.confidence import confidence_word
from bot.render.safe_text import strip_controls
from matcher.model import Diagnosis, Evidence

EVIDENCE_SHOWN = 5
EXCERPT_CHARS = 220


def _clean(text: str, limit: int | None = EXCERPT_CHARS) -> str:
    """Printable single-line excerpt: escape sequences and control characters out (`strip_controls`),
    runs of spaces one, cut at `limit` (None: our own data text, such as a runbook's settle line)."""
    cleaned = " ".join(strip_controls(text).split())  # progress bars pad with long runs of spaces
    return cleaned if limit is None or len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def headline(diagnosis: Diagnosis) -> Text:
    primary = diagnosis.primary
    line = Text()
    style = "bold red" if primary.class_id != "unknown" else "bold yellow"
    line.append(_clean(primary.class_id), style=style)
    line.append(f"  {_clean(primary.title)}")
    line.append(
        f"  (confidence {primary.confidence:.2f}, {confidence_word(primary.confidence)})",
        style="dim",
    )
    return line


def culprit_text(diagnosis: Diagnosis) -> Text:
    text = Text("Culprit: ", style="bold")
    culprit = diagnosis.culprit
    if culprit is None:
        text.append("none named", style="yellow")
        if diagnosis.no_culprit_reason:
            text.append(f" — {_clean(diagnosis.no_culprit_reason)}")
        return text
    where = []
    if culprit.ranks:
        where.append("rank" + ("s " if len(culprit.ranks) > 1 else " ") + ", ".join(map(str, culprit.ranks)))
    if culprit.hosts:
        where.append("on " + ", ".join(culprit.hosts))
    text.append(_clean(" ".join(where)) or "see reason", style="bold")
    text.append(f" — {_clean(culprit.reason)}")
    return text


def evidence_text(evidence: Evidence) -> Text:
    text = Text("  ")
    text.append(f"{_clean(evidence.source)}:{evidence.line}", style="cyan")
    text.append(f"  {_clean(evidence.text)}")
    return text


def render_diagnosis(
    console: Console,
    diagnosis: Diagnosis,
    *,
    runbook: Any = None,
    recurrence: str | None = None,
) -> None:
    stats = diagnosis.stats
    ranks = f"{stats.ranks} rank(s)" if stats.ranks else "ranks not identified"
    summary = f"Read {stats.bytes:,} bytes, {stats.lines:,} lines, {ranks} in {stats.seconds:.2f} s"
    console.print(Text(summary, style="dim"))
    console.print(headline(diagnosis))
    console.print(culprit_text(diagnosis))
    if diagnosis.symptom:
        console.print(Text.assemble(("Symptom: ", "bold"), _clean(diagnosis.symptom)))
    if recurrence:
        console.print(Text.assemble(("Recurrence: ", "bold"), _clean(recurrence)))

    # Two signatures can quote the same line; a person needs to read it once.
    unique = {(e.source, e.line): e for e in reversed(diagnosis.primary.evidence)}
    evidence = sorted(unique.values(), key=diagnosis.primary.evidence.index)[:EVIDENCE_SHOWN]
    if evidence:
        console.print(Text("\nEvidence", style="bold"))
        for item in evidence:
            console.print(evidence_text(item))

    others = diagnosis.diagnoses[1:4]
    if others:
        console.print(Text("\nAlso considered", style="bold"))
        for score in others:
            title = _clean(score.title)
            console.print(Text(f"  {_clean(score.class_id)} ({score.confidence:.2f}) — {title}"))

    settle = runbooks.settle_for([score.to_json() for score in diagnosis.diagnoses])
    if settle:
        console.print(Text("\nWhat would settle it (this is a guess)", style="bold"))
        for entry in settle:
            console.print(Text(f"  {entry.class_id}: {_clean(entry.text, limit=None)}"))

    if runbook is not None:
        from bot.render.runbook_text import render as render_runbook

        console.print()
        console.print(Text(render_runbook(runbook, width=min(console.width, 100), brief=True)))
