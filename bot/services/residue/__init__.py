"""The residue: what the bot could not recognise yet. Error-like lines of `unknown` and low-confidence
diagnoses that no signature matches are mined into templates (Drain3, state in the store), counted per
diagnosis, listed by `ncclbot residue` and the weekly digest, and turned into signature skeletons for a
maintainer to finish (`ncclbot residue --signature ID`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.model.residue import Skeleton
from bot.services.residue.collect import CandidateLine, RecognisedLines, candidate_lines
from bot.services.residue.miner import MINER_NAME, mine, templates
from bot.services.residue.skeleton import skeleton_for
from bot.store.records import iso_utc
from matcher.model import Diagnosis
from matcher.reading.read import ReadLimits
from matcher.scanning.catalog import load_catalog
from matcher.taxonomy import UNKNOWN

log = logging.getLogger("ncclbot.services.residue")

# Below this confidence a diagnosis is a guess: its unrecognised lines are worth mining too.
LOW_CONFIDENCE = 0.5
EXAMPLES = 5

__all__ = [
    "LOW_CONFIDENCE",
    "CandidateLine",
    "Skeleton",
    "Template",
    "list_templates",
    "record_residue",
    "should_mine",
    "signature_skeleton",
]


@dataclass(frozen=True, slots=True)
class Template:
    id: int
    template: str
    occurrences: int  # diagnoses it was seen in
    lines: int
    classes: tuple[str, ...]  # what those diagnoses concluded
    first_seen: datetime
    last_seen: datetime
    examples: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "template": self.template,
            "occurrences": self.occurrences,
            "lines": self.lines,
            "classes": list(self.classes),
            "first_seen": iso_utc(self.first_seen),
            "last_seen": iso_utc(self.last_seen),
            "examples": list(self.examples),
        }


def should_mine(diagnosis: Diagnosis) -> bool:
    primary = diagnosis.primary
    return primary.class_id == UNKNOWN or primary.confidence < LOW_CONFIDENCE


def record_residue(
    store: Any,
    occurrence_id: int,
    paths: Sequence[str],
    *,
    at: datetime,
    limits: ReadLimits | None = None,
) -> int:
    """Collect the unrecognised lines of `paths`, mine them and store what they added for this
    occurrence; returns the number of templates they fell into."""
    lines = candidate_lines(paths, RecognisedLines(load_catalog()), limits=limits)
    return mine_lines(store, occurrence_id, lines, at=at)


def mine_lines(store: Any, occurrence_id: int, lines: Sequence[CandidateLine], *, at: datetime) -> int:
    if not lines:
        return 0
    with store.residue_writer(MINER_NAME) as writer:
        samples = mine(writer, lines, at)
        writer.add_samples(occurrence_id, samples, at)
    return len(samples)


def list_templates(store: Any, *, days: int, now: datetime, limit: int | None = None) -> list[Template]:
    """Templates seen in the last `days`, in the most diagnoses first (the first `limit` of them)."""
    counts = store.residue_counts(days=days, now=now)[:limit]
    if not counts:
        return []
    text = templates(store.miner_state(MINER_NAME))
    found = []
    for c in counts:
        examples = tuple(store.residue_examples(c.template_id, limit=EXAMPLES, until=now))
        found.append(
            Template(
                id=c.template_id,
                # A template dropped from the bounded tree keeps its counts; an example stands in.
                template=text.get(c.template_id, examples[0] if examples else ""),
                occurrences=c.occurrences,
                lines=c.lines,
                classes=c.classes,
                first_seen=c.first_seen,
                last_seen=c.last_seen,
                examples=examples,
            )
        )
    return found


def signature_skeleton(store: Any, template_id: int) -> Skeleton | None:
    """A signature draft for template `template_id`, or None when the store never saw it."""
    examples = store.residue_examples(template_id, limit=EXAMPLES)
    if not examples:
        return None
    text = templates(store.miner_state(MINER_NAME)).get(template_id)
    return skeleton_for(template_id, text, examples)
