"""What an occurrence keeps of a diagnosis beyond its class: size, timeout, cost, a short excerpt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from matcher.analysis.redact import clean
from matcher.model import Diagnosis, FieldValue

# Optional fact (milliseconds between the last progress line and the failure) that an analysis may
# add; the cost estimate uses it where present.
SINCE_PROGRESS_FACT = "since_progress_ms"

EXCERPT_LINES = 5
# What an occurrence keeps of the diagnosis document: enough to draw the message again.
DOCUMENT_CLASSES = 5
DOCUMENT_EVIDENCE = 12
DOCUMENT_LINE_CHARS = 500
EXCERPT_CHARS = 2000
MS_PER_HOUR = 3_600_000
# The integer columns are 32-bit on PostgreSQL. A log can claim `Timeout(ms)=99999999999999999999`: a
# value past the column is unknown rather than a failed insert (24.8 days of milliseconds fit).
MAX_STORED_INT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class OccurrenceFacts:
    confidence: float
    ranks: tuple[int, ...]
    world_size: int | None
    timeout_ms: int | None
    since_progress_ms: int | None
    gpu_hours_lost: float | None
    evidence_excerpt: str


# Text columns hold 255 characters; names come from logs and payloads.
MAX_NAME_CHARS = 255


def stored_name(text: str) -> str:
    """A host, cluster or job name as stored: credentials masked, control characters out, cut to the
    column. A name with an escape sequence in it must not reach `ncclbot incidents` or a Slack message."""
    return " ".join(clean(text).split())[:MAX_NAME_CHARS]


def gpu_hours_lost(
    world_size: int | None, timeout_ms: int | None, since_progress_ms: int | None
) -> float | None:
    """World size x time lost (the timeout that fired, plus the time since the last progress line where
    known). None when the world size or the timeout is unknown: no cost beats a made-up one."""
    if not world_size or timeout_ms is None:
        return None
    return world_size * (timeout_ms + (since_progress_ms or 0)) / MS_PER_HOUR


def _as_int(value: FieldValue | None) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    else:
        try:
            number = int(float(value))
        except (TypeError, ValueError, OverflowError):
            return None
    return number if 0 <= number <= MAX_STORED_INT else None


def occurrence_facts(diagnosis: Diagnosis) -> OccurrenceFacts:
    facts = diagnosis.facts
    # The logs may not state the world size; the ranks seen in them are a lower bound.
    world_size = _as_int(facts.get("world_size")) or (diagnosis.stats.ranks or None)
    timeout_ms = _as_int(facts.get("timeout_ms"))
    since_progress_ms = _as_int(facts.get(SINCE_PROGRESS_FACT))
    ranks = diagnosis.culprit.ranks if diagnosis.culprit else ()
    evidence = diagnosis.primary.evidence[:EXCERPT_LINES]
    # Diagnoses can come from outside the pipeline (a webhook's JSON): mask and strip again before storing.
    excerpt = "\n".join(clean(f"{e.source}:{e.line}: {e.text}") for e in evidence)[:EXCERPT_CHARS]
    return OccurrenceFacts(
        confidence=diagnosis.primary.confidence,
        ranks=tuple(r for r in ranks if 0 <= r <= MAX_STORED_INT),
        world_size=world_size,
        timeout_ms=timeout_ms,
        since_progress_ms=since_progress_ms,
        gpu_hours_lost=gpu_hours_lost(world_size, timeout_ms, since_progress_ms),
        evidence_excerpt=excerpt,
    )


def diagnosis_document(diagnosis: Diagnosis) -> dict[str, Any]:
    """`Diagnosis.to_json()` bounded in size: the top classes, a dozen evidence lines each, long lines cut."""
    document = diagnosis.to_json()
    document["diagnoses"] = document["diagnoses"][:DOCUMENT_CLASSES]
    for score in document["diagnoses"]:
        score["evidence"] = [
            {**item, "text": item["text"][:DOCUMENT_LINE_CHARS]}
            for item in score["evidence"][:DOCUMENT_EVIDENCE]
        ]
    document["facts"] = dict(diagnosis.facts)
    if diagnosis.no_culprit_reason:
        document["no_culprit_reason"] = diagnosis.no_culprit_reason
    return document
