"""The one line a command prints on stderr (an error, a warning): first line only, no credentials, no
control characters, bounded length.

Messages quote file names, database URLs and driver errors, all of which can carry a password, an
escape sequence or a bidi override (a file named with U+202E reads backwards in a terminal).
"""

from __future__ import annotations

from matcher.analysis.redact import redact, strip_controls

MAX_MESSAGE_CHARS = 500


def one_line(message: str) -> str:
    lines = str(message).strip().splitlines()
    first = " ".join(strip_controls(redact(lines[0] if lines else "")).split())
    return first if len(first) <= MAX_MESSAGE_CHARS else first[: MAX_MESSAGE_CHARS - 1] + "…"
