"""JSON output for every command: the same document, with control characters stripped from every string.

Log text, host names and file names reach `--json` output unchanged otherwise, and a terminal, a pager or a
chat message that shows the JSON would act on an escape sequence or a bidi override in them. Newlines and
tabs stay: they are escaped by JSON itself and runbook text has paragraphs.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from bot.render.safe_text import strip_controls


def safe_document(value: Any) -> Any:
    """A copy of a JSON-able value whose every string (keys included) has no control characters."""
    if isinstance(value, str):
        return strip_controls(value)
    if isinstance(value, dict):
        return {safe_document(k) if isinstance(k, str) else k: safe_document(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe_document(item) for item in value]
    return value


def dump(document: Any, stream: TextIO) -> None:
    json.dump(safe_document(document), stream, indent=2, ensure_ascii=False)
    stream.write("\n")
