"""A signature draft mined from unrecognised lines (`ncclbot residue --signature ID`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Skeleton:
    """`pattern` matches every line of `match`; `keywords` (one literal, or none found) occurs in each."""

    template_id: int
    template: str
    id: str
    pattern: str
    keywords: tuple[str, ...]
    match: tuple[str, ...]
