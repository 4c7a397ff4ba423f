"""One-line texts for the terminal: the line a command prints on stderr (an error, a warning: first line
only, no credentials, no control characters, bounded length) and a table or column field.

Messages quote file names, database URLs and driver errors, all of which can carry a password, an
escape sequence or a bidi override (a file named with U+202E reads backwards in a terminal).
"""

from __future__ import annotations

from bot.render.safe_text import strip_controls
from matcher.analysis.redact import redact

MAX_MESSAGE_CHARS = 500


def one_line(message: str) -> str:
    lines = str(message).strip().splitlines()
    first = " ".join(strip_controls(redact(lines[0] if lines else "")).split())
    return first if len(first) <= MAX_MESSAGE_CHARS else first[: MAX_MESSAGE_CHARS - 1] + "…"


def field(value: object, width: int = 200) -> str:
    """One printable, single-line field of at most `width` characters (a host, a job id, a table cell)."""
    text = " ".join(strip_controls(str(value)).split())
    return text if len(text) <= width else text[: width - 1] + "…"
