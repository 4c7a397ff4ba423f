"""Plain-text rendering of a filled runbook for an 80-column terminal.

Plain text rather than rich markup: values from logs end up in the output, and plain text cannot be
tricked into markup or terminal escapes (control characters are removed here as a last guard). Prose
is wrapped to the width; commands are never re-flowed, only broken between words that are outside
quotes, with a trailing backslash, so that a copied command still means the same thing to the shell.
"""

from __future__ import annotations

import re
import textwrap
import unicodedata

from runbooks.model import RenderedRunbook, Step

_INDENT = "    "


def _printable(text: str) -> str:
    return "".join(char if char == "\n" or unicodedata.category(char)[0] != "C" else " " for char in text)


_LIST_MARKER = re.compile(r"(\d+\)|[-*]) ")


def _wrap(text: str, width: int, first: str = "", rest: str | None = None) -> list[str]:
    """Wrap each paragraph; a paragraph that starts like "2) " gets a hanging indent."""
    lines: list[str] = []
    subsequent = rest if rest is not None else " " * len(first)
    for index, paragraph in enumerate(_printable(text).split("\n")):
        if not paragraph.strip():
            lines.append("")
            continue
        initial = first if index == 0 else subsequent
        marker = _LIST_MARKER.match(paragraph)
        hanging = " " * len(initial) + " " * len(marker.group(0)) if marker else subsequent
        lines.extend(
            textwrap.wrap(
                paragraph,
                width=width,
                initial_indent=initial,
                subsequent_indent=hanging,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return lines


def _shell_words(line: str) -> list[str]:
    """Split a command line at spaces outside quotes, keeping each word's exact text."""
    words: list[str] = []
    current: list[str] = []
    quote: str | None = None
    escaped = False
    for char in line:
        if escaped:
            escaped = False
        elif quote == "'":
            quote = None if char == "'" else quote
        elif char == "\\":
            escaped = True
        elif quote == '"':
            quote = None if char == '"' else quote
        elif char in "'\"":
            quote = char
        elif char == " ":
            if current:
                words.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        words.append("".join(current))
    return words


def wrap_command(command: str, width: int, indent: str = _INDENT) -> list[str]:
    """Command lines prefixed by `indent`; over-long lines continue with ` \\` between words."""
    out: list[str] = []
    for raw_line in _printable(command).split("\n"):
        words = _shell_words(raw_line)
        if len(indent + raw_line) <= width or len(words) < 2:
            out.append(indent + raw_line)
            continue
        current = indent + words[0]
        for word in words[1:]:
            if len(current) + 1 + len(word) + 2 > width:  # keep room for the " \\"
                out.append(current + " \\")
                current = indent + "  " + word
            else:
                current += " " + word
        out.append(current)
    return out


def _step_lines(step: Step, width: int, label: str) -> list[str]:
    lines = _wrap(step.title, width, first=label)
    if step.command is not None:
        lines.extend(wrap_command(step.command, width))
    lines.extend(_wrap(step.expect, width, first=" " * len(label)))
    return lines


def render(rendered: RenderedRunbook, *, width: int = 80, brief: bool = False) -> str:
    """The runbook as text lines no wider than `width` (except single words longer than that).

    `brief` keeps the summaries, steps and verification and leaves out dead ends, prevention and
    references (for `ncclbot diagnose`, which points to `ncclbot runbook CLASS` for the rest).
    """
    width = max(width, 40)
    lines: list[str] = []
    heading = f"Runbook: {rendered.title} [{rendered.class_id}]"
    lines.extend(_wrap(heading, width))
    lines.append("=" * min(width, len(heading)))

    for label, text in (
        ("Executive", rendered.summaries.executive),
        ("Engineer", rendered.summaries.engineer),
        ("On-call (next 10 minutes)", rendered.summaries.oncall),
    ):
        lines.append("")
        lines.append(f"{label}:")
        lines.extend(_wrap(text, width, first="  "))

    lines.append("")
    lines.append("Steps:")
    for number, step in enumerate(rendered.steps, start=1):
        lines.extend(_step_lines(step, width, f"{number:>2}. "))

    lines.append("")
    lines.append("Verify the fix:")
    lines.extend(_step_lines(rendered.verify, width, "  - "))

    if brief:
        lines.append("")
        lines.append(f"Dead ends, prevention and references: ncclbot runbook {rendered.class_id}")
        return "\n".join(line.rstrip() for line in lines) + "\n"

    lines.append("")
    lines.append("Dead ends (do not bother):")
    for dead_end in rendered.dead_ends:
        lines.extend(_wrap(f"{dead_end.attempt} — {dead_end.why}", width, first="  - "))

    lines.append("")
    lines.append("Prevention checklist:")
    for item in rendered.prevention:
        lines.extend(_wrap(item, width, first="  [ ] "))

    lines.append("")
    lines.append("References:")
    for reference in rendered.references:
        lines.append(f"  {_printable(reference)}")
    return "\n".join(line.rstrip() for line in lines) + "\n"
