"""Untrusted text (log lines, host names, file names) made safe to show: no control characters that
move a terminal's cursor, recolour it or reorder text (bidi overrides), whichever renderer it goes to.

Every renderer (terminal, JSON, Slack) passes log-derived strings through `strip_controls`."""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, C1 controls, and the Unicode bidi embedding/override/isolate
# and mark characters that can make `evil.sh` display as `hs.live` (Trojan Source).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Whole ANSI escape sequences (colours, cursor moves, OSC hyperlinks/titles), so that their printable
# tails do not stay behind once the ESC is gone.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_controls(text: str, *, keep_newlines: bool = True) -> str:
    cleaned = _CONTROLS.sub("", _ANSI.sub("", text))
    return cleaned if keep_newlines else cleaned.replace("\n", " ")
