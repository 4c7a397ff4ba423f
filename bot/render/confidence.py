"""The word every front end shows beside a diagnosis' confidence. "low" is the band in which a diagnosis
is a guess and says what would settle it (`matcher.model.GUESS_BELOW`)."""

from __future__ import annotations

from matcher.model import GUESS_BELOW

HIGH_FROM = 0.8


def confidence_word(confidence: float) -> str:
    return "high" if confidence >= HIGH_FROM else "medium" if confidence >= GUESS_BELOW else "low"
