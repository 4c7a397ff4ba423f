"""What would settle a guess: for a diagnosis that is not sure of itself, the evidence that would
confirm each class it lists and how to collect it (each runbook's `settle` text).

A thin paste (one `unhandled system error` line, a title) often cannot name its cause; the honest reply
lists the likely classes and says what to add so the next diagnosis can tell them apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matcher.model import GUESS_BELOW, is_guess
from matcher.taxonomy import UNKNOWN
from runbooks.model import Runbook

# A guess names at least three classes (matcher/next_checks.toml fills them): one settle text each.
MAX_CLASSES = 3


@dataclass(frozen=True, slots=True)
class Settle:
    class_id: str
    title: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"class": self.class_id, "title": self.title, "collect": self.text}


def what_would_settle(
    diagnoses: Sequence[Mapping[str, Any]], runbooks: Mapping[str, Runbook]
) -> tuple[Settle, ...]:
    """For a guess (primary confidence below GUESS_BELOW, or `unknown` first): the settle text of its
    first classes other than `unknown` (at most MAX_CLASSES), or `unknown`'s own when it names none.
    Empty when sure."""
    if not diagnoses:
        return ()
    primary = diagnoses[0]
    if not is_guess(str(primary.get("class")), float(primary.get("confidence", 0.0))):
        return ()
    listed = [str(d.get("class")) for d in diagnoses]
    named = [c for c in dict.fromkeys(listed) if c != UNKNOWN and c in runbooks][:MAX_CLASSES]
    chosen = named or ([UNKNOWN] if UNKNOWN in runbooks else [])
    return tuple(Settle(c, runbooks[c].title, runbooks[c].settle) for c in chosen)


__all__ = ["GUESS_BELOW", "MAX_CLASSES", "Settle", "what_would_settle"]
