"""Plain data for runbooks: the parsed template (`Runbook`) and the filled result (`RenderedRunbook`).

A `Runbook` holds template strings exactly as written in runbooks/classes/*.toml; `RenderedRunbook`
holds the same structure after the diagnosis' values were substituted. `RenderedRunbook.to_json()` is
the `runbook` member of `ncclbot diagnose --json` and the output of `ncclbot runbook CLASS --json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EXECUTIVE_MAX_CHARS = 300
SETTLE_MAX_CHARS = 400  # one Slack bullet; three of them follow a guess


@dataclass(frozen=True, slots=True)
class Summaries:
    executive: str  # impact and risk in plain words, <= EXECUTIVE_MAX_CHARS once rendered
    engineer: str  # mechanism, what in the evidence proves it, what to check next
    oncall: str  # what to do in the next ten minutes, in order

    def to_json(self) -> dict[str, str]:
        return {"executive": self.executive, "engineer": self.engineer, "oncall": self.oncall}


@dataclass(frozen=True, slots=True)
class Step:
    title: str
    command: str | None  # None where no command applies (a code change, a decision)
    expect: str  # what a good and a bad result look like

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "command": self.command, "expect": self.expect}


@dataclass(frozen=True, slots=True)
class DeadEnd:
    attempt: str  # what people try
    why: str  # why it does not fix this root cause

    def to_json(self) -> dict[str, str]:
        return {"attempt": self.attempt, "why": self.why}


@dataclass(frozen=True, slots=True)
class Runbook:
    """One class' runbook as written (templates, not yet filled)."""

    class_id: str
    title: str
    summaries: Summaries
    steps: tuple[Step, ...]
    verify: Step
    dead_ends: tuple[DeadEnd, ...]
    prevention: tuple[str, ...]
    references: tuple[str, ...]
    source: str  # file it was loaded from, for error messages
    # What in the logs would confirm this class and how to collect it: shown beside a guess so the
    # reader knows what to add (plain text, no placeholders: it is shown for classes not yet confirmed).
    settle: str = ""


@dataclass(frozen=True, slots=True)
class RenderedRunbook:
    """A runbook filled with one diagnosis' values; every string is final text."""

    class_id: str
    title: str
    summaries: Summaries
    steps: tuple[Step, ...]
    verify: Step
    dead_ends: tuple[DeadEnd, ...]
    prevention: tuple[str, ...]
    references: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "class": self.class_id,
            "title": self.title,
            "summaries": self.summaries.to_json(),
            "steps": [step.to_json() for step in self.steps],
            "verify": self.verify.to_json(),
            "dead_ends": [dead_end.to_json() for dead_end in self.dead_ends],
            "prevention": list(self.prevention),
            "references": list(self.references),
        }
