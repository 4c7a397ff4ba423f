"""Untrusted text (log lines, host names, file names) made safe to show: no control characters that
move a terminal's cursor, recolour it or reorder text (bidi overrides), whichever renderer it goes to.

Every renderer (terminal, JSON, Slack) passes log-derived strings through `strip_controls`. The one
implementation lives beside the redaction rules in `matcher.analysis.redact` (the matcher cleans culprit
hosts and evidence with it, and cannot import bot/); this is the renderers' name for it.
"""

from __future__ import annotations

from matcher.analysis import redact


def strip_controls(text: str, *, keep_newlines: bool = True) -> str:
    """`text` without escape sequences, C0/C1 controls, bidi and zero-width characters; tabs stay, and
    newlines too unless `keep_newlines` is false (then they become spaces)."""
    return redact.strip_controls(text, keep="\t\n" if keep_newlines else "\t")
