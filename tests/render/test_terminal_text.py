"""Every terminal renderer shows remote and log text as text: Rich markup and escape sequences in it are
never interpreted."""

from __future__ import annotations

import io

from rich.console import Console

from bot.commands.probe import render
from bot.render.json_text import safe_document
from probes.result import Check, ProbeResult

HOSTILE = "[link=https://evil.example]click[/link] [bold red]x[/] \x1b]0;title\x07\x1b[2J\u202e"


def test_probe_output_shows_kernel_log_evidence_and_reasons_as_text() -> None:
    result = ProbeResult(
        "failed",
        [f"node check failed: {HOSTILE}"],
        "gloo",
        2,
        "gpu01",
        checks=[Check("xid", "fail", f"NVRM: Xid 79 {HOSTILE}", host="gpu01")],
    )
    out = io.StringIO()
    render(result, Console(file=out, width=400, color_system=None, highlight=False))
    text = out.getvalue()
    assert text.count("[link=https://evil.example]click[/link]") == 2
    assert "[bold red]x[/]" in text
    assert not [c for c in ("\x1b", "\x07", "\u202e") if c in text]


def test_json_documents_lose_control_characters_but_keep_newlines_and_tabs() -> None:
    document = {"text": "a\x1b[31mb\tc\nd\u202e", "list": ["\x9b2J", 3], "key\x07": None}
    assert safe_document(document) == {"text": "ab\tc\nd", "list": ["", 3], "key ": None}
