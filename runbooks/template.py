"""A format-only template language for runbook text and commands.

Syntax: `{field}` inserts a diagnosis value, `{field|fallback text}` gives the wording to use when the
value is missing, `{{` and `}}` are literal braces. That is all: no attribute or index access, no
expressions, no calls, so a runbook file can never run code or reach into objects. Field names are
plain identifiers; the loader checks them against the known vocabulary.

Commands get one more rule, checked by `check_command`: a placeholder may not sit inside a quoted
part of the command, because the value is shell-quoted on insertion and quoting inside an outer
quote would undo that protection.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


class TemplateError(ValueError):
    """A template string that does not follow the syntax above."""


@dataclass(frozen=True, slots=True)
class Placeholder:
    name: str
    fallback: str | None  # None: use the field's default wording
    offset: int  # position of the opening brace in the template, for error messages


Segment = str | Placeholder


def parse(template: str) -> tuple[Segment, ...]:
    """Split a template into literal text and placeholders, or raise TemplateError."""
    segments: list[Segment] = []
    literal: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if char == "{" and template.startswith("{{", i):
            literal.append("{")
            i += 2
        elif char == "}" and template.startswith("}}", i):
            literal.append("}")
            i += 2
        elif char == "}":
            raise TemplateError(f"unmatched '}}' at offset {i} (write '}}}}' for a literal brace)")
        elif char == "{":
            end = template.find("}", i + 1)
            if end < 0:
                raise TemplateError(f"unclosed '{{' at offset {i}")
            body = template[i + 1 : end]
            if "{" in body:
                raise TemplateError(f"nested '{{' in placeholder at offset {i}")
            name, bar, fallback = body.partition("|")
            if not _NAME.match(name):
                raise TemplateError(f"bad field name {name!r} at offset {i} (lower-case identifier expected)")
            if literal:
                segments.append("".join(literal))
                literal = []
            segments.append(Placeholder(name=name, fallback=fallback if bar else None, offset=i))
            i = end + 1
        else:
            literal.append(char)
            i += 1
    if literal:
        segments.append("".join(literal))
    return tuple(segments)


def placeholders(segments: tuple[Segment, ...]) -> tuple[Placeholder, ...]:
    return tuple(segment for segment in segments if isinstance(segment, Placeholder))


def check_command(segments: tuple[Segment, ...]) -> None:
    """Raise TemplateError when a placeholder sits inside single or double quotes of a command."""
    quote: str | None = None
    escaped = False
    for segment in segments:
        if isinstance(segment, Placeholder):
            if quote is not None:
                raise TemplateError(
                    f"placeholder {{{segment.name}}} at offset {segment.offset} is inside {quote}-quotes; "
                    "values are shell-quoted on insertion, so put the placeholder outside any quotes"
                )
            escaped = False
            continue
        for char in segment:
            if escaped:
                escaped = False
            elif quote == "'":
                if char == "'":
                    quote = None
            elif char == "\\":
                escaped = True
            elif quote == '"':
                if char == '"':
                    quote = None
            elif char in "'\"":
                quote = char


def fill(segments: tuple[Segment, ...], resolve: Callable[[Placeholder], str]) -> str:
    """Join the segments, asking `resolve` for each placeholder's final text."""
    return "".join(segment if isinstance(segment, str) else resolve(segment) for segment in segments)
