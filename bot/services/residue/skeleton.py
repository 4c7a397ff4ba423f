"""A signature draft from a mined template: the pattern (literal words escaped, masked parts back to
the masks' own patterns, Drain's wildcards as one token), a keyword every example holds, and the
examples as `match` lines. A maintainer still names it, picks the class and role, and adds `no_match`
lines (matcher/signatures/README.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.model.residue import Skeleton
from bot.services.residue.miner import masks

_PLACEHOLDER = re.compile(r"<(\*|[A-Z]+)>")
WILDCARD = r"\S+"
MIN_KEYWORD = 4


def skeleton_for(template_id: int, template: str | None, examples: Sequence[str]) -> Skeleton:
    shown = template or examples[0]
    tokens = shown.split()
    return Skeleton(
        template_id=template_id,
        template=shown,
        id=f"residue-{template_id}",
        pattern=r"\s+".join(_token_pattern(t) for t in tokens) if template else re.escape(examples[0]),
        keywords=_keyword(tokens, examples),
        match=tuple(examples),
    )


def _token_pattern(token: str) -> str:
    mask_patterns: dict[str, list[str]] = {}
    for mask in masks():
        mask_patterns.setdefault(mask.name, []).append(mask.in_signature)
    parts, position = [], 0
    for placeholder in _PLACEHOLDER.finditer(token):
        parts.append(re.escape(token[position : placeholder.start()]))
        name = placeholder[1]
        if name in mask_patterns:
            alternatives = mask_patterns[name]
            parts.append(alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")")
        else:
            parts.append(WILDCARD)
        position = placeholder.end()
    parts.append(re.escape(token[position:]))
    return "".join(parts)


def _keyword(tokens: list[str], examples: Sequence[str]) -> tuple[str, ...]:
    """The longest run of literal text in the template that every example contains."""
    runs: list[str] = []
    current: list[str] = []
    for token in tokens:
        pieces = _PLACEHOLDER.split(token)
        if len(pieces) == 1:
            current.append(token)
            continue
        literal = [p for i, p in enumerate(pieces) if i % 2 == 0]
        current.append(literal[0])
        runs.append(" ".join(current).strip())
        runs.extend(p for p in literal[1:-1])
        current = [literal[-1]] if literal[-1] else []
    runs.append(" ".join(current).strip())
    for run in sorted({r for r in runs if len(r) >= MIN_KEYWORD}, key=lambda r: (-len(r), r)):
        if all(run in example for example in examples):
            return (run,)
    return ()
