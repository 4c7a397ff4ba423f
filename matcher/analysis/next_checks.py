"""What an expert checks next (`matcher/next_checks.toml`): a guess names at least three classes.

A thin paste read as a lone low-confidence class, or as `unknown` and one class, serves the on-call
engineer worse than the two or three classes an expert would look at next. `fill` appends them to a
guess's ranked list, after the ranking is final: each filled class has no evidence and a confidence
strictly below the class listed above it, so rank 1 (and with it the culprit, the facts and the
fingerprint, which come from rank 1 alone) never changes. A sure diagnosis gets them far below it
(`sure_share`), and a bundle where nothing at all was read (`unknown` alone) keeps its honest 'nothing
here'.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from matcher.model import ClassScore, is_guess
from matcher.rules import NEXT_CHECKS_FILE
from matcher.taxonomy import CLASSES, UNKNOWN, title

# Confidences are printed with three decimals (`ClassScore.to_json`): a filled class must stay strictly
# below the one above it at that precision too.
_PRECISION = 3


@dataclass(frozen=True, slots=True)
class NextChecks:
    wanted: int  # a guess names at least this many classes other than `unknown`
    share: float  # a filled class's share of the confidence of the class listed just above it
    sure_share: float  # under a sure diagnosis, the first filled class's share of the class above (0: none)
    rows: Mapping[str, tuple[str, ...]]  # class -> the classes checked next, in order


def parse_next_checks(document: dict[str, Any]) -> NextChecks:
    """Validated table: every id a TAXONOMY class (never `unknown`), no row naming itself or a class
    twice, settings in range. Raises ValueError naming the offending row."""
    settings = document["settings"]
    wanted, share = int(settings["wanted"]), float(settings["share"])
    sure_share = float(settings["sure_share"])
    if wanted < 1 or not 0.0 < share < 1.0 or not 0.0 <= sure_share < 1.0:
        raise ValueError(f"{NEXT_CHECKS_FILE.name}: wanted must be >= 1, 0 < share < 1, 0 <= sure_share < 1")
    rows: dict[str, tuple[str, ...]] = {}
    for cls, checks in document.get("next", {}).items():
        named = [cls, *checks]
        bad = [c for c in named if c not in CLASSES or c == UNKNOWN]
        if bad or cls in checks or len(set(checks)) != len(checks) or not checks:
            raise ValueError(
                f"{NEXT_CHECKS_FILE.name}: row {cls!r}: unknown classes {bad}, an empty row, the class "
                "itself or a class listed twice"
            )
        rows[cls] = tuple(checks)
    return NextChecks(wanted=wanted, share=share, sure_share=sure_share, rows=rows)


@functools.cache
def next_checks() -> NextChecks:
    return parse_next_checks(tomllib.loads(NEXT_CHECKS_FILE.read_text(encoding="utf-8")))


def fill(
    ranked: tuple[ClassScore, ...], limit: int, table: NextChecks | None = None
) -> tuple[ClassScore, ...]:
    """`ranked` with a guess's next checks appended until it names `wanted` classes (at most `limit`
    entries in all), the first at `sure_share` of a sure diagnosis; unchanged for one that names no
    class (or a sure one when `sure_share` is 0)."""
    table = table or next_checks()
    if not ranked:
        return ranked
    sure = not is_guess(ranked[0].class_id, ranked[0].confidence)
    if sure and table.sure_share == 0.0:
        return ranked
    listed = [score.class_id for score in ranked]
    named = [c for c in listed if c != UNKNOWN]
    # The rows of the classes named, in rank order: with `unknown` first, the runner-up's row leads.
    candidates = [c for cls in named for c in table.rows.get(cls, ()) if c not in listed]
    missing = min(table.wanted - len(named), limit - len(listed))
    scores = list(ranked)
    for cls in dict.fromkeys(candidates):
        if missing <= 0:
            break
        above = round(scores[-1].confidence, _PRECISION)
        # Far below a sure answer: an evidence-less neighbour must not look like a second opinion.
        share = table.sure_share if sure and len(scores) == len(ranked) else table.share
        confidence = round(above * share, _PRECISION)
        if not 0.0 < confidence < above:
            break  # nothing left to claim below the last class
        scores.append(ClassScore(cls, confidence, title(cls)))
        missing -= 1
    return tuple(scores)


__all__ = ["NEXT_CHECKS_FILE", "NextChecks", "fill", "next_checks", "parse_next_checks"]
