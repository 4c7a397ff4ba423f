"""Untrusted text made safe for Slack mrkdwn: no mention, link, code fence or control character survives,
nothing else changes, and every limit holds without cutting an escape in half."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.render.slack_text import (
    BACKTICK_LOOKALIKE,
    ELLIPSIS,
    HEADER_TEXT_LIMIT,
    SECTION_TEXT_LIMIT,
    code_block,
    inline_code,
    link,
    mrkdwn,
    mrkdwn_escape,
    plain_text,
)
from matcher.analysis.redact import strip_controls

WORD_JOINER = "\u2060"
# Text that exercises every rule: Slack's control characters, mention syntax, backticks, controls, bidi.
_PIECES = [
    *"&<>|!@#`*_~:/ ahC1U\n\t",
    *("<!channel>", "<!here>", "@here", "@channel", "&amp;", "\x1b[31m"),
    *("\u202e", "\u200b", "\x9b", "\x00", "é", "😀"),
]
HOSTILE = st.lists(st.sampled_from(_PIECES), max_size=120).map("".join)


def _unescape(text: str) -> str:
    text = text.replace(WORD_JOINER, "").replace(BACKTICK_LOOKALIKE, "`")
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _only_our_format_characters(text: str) -> bool:
    for index, char in enumerate(text):
        if unicodedata.category(char) == "Cc" and char not in "\t\n":
            return False
        if unicodedata.category(char) == "Cf":
            if char == WORD_JOINER and text[index - 1 : index] == "@":
                continue
            return False
    return True


_BARE_AMPERSAND = re.compile(r"&(?!amp;|lt;|gt;)")


@pytest.mark.parametrize(
    ("hostile", "shown"),
    [
        ("<!channel> job died", "&lt;!channel&gt; job died"),
        ("<!here|here>", "&lt;!here|here&gt;"),
        ("<!subteam^S012> ping", "&lt;!subteam^S012&gt; ping"),
        ("ask <@U024BE7LH>", "ask &lt;@U024BE7LH&gt;"),
        ("see <#C024BE7LR|general>", "see &lt;#C024BE7LR|general&gt;"),
        ("<http://evil.example|https://pytorch.org>", "&lt;http://evil.example|https://pytorch.org&gt;"),
        ("a & b &amp; c", "a &amp; b &amp;amp; c"),
        ('it\'s "quoted"', 'it\'s "quoted"'),  # no other HTML entity, ever
        ("@here wake up", f"@{WORD_JOINER}here wake up"),
        ("@Channel", f"@{WORD_JOINER}Channel"),
        ("user@herelabs.io", "user@herelabs.io"),
        ("gpu\x1b[31m01\u202e", "gpu01"),
        ("\x1b[31mred\x1b[0m \u202eevil\u202c", "red evil"),
        ("```<!channel>```", f"{BACKTICK_LOOKALIKE * 3}&lt;!channel&gt;{BACKTICK_LOOKALIKE * 3}"),
    ],
)
def test_mentions_links_and_controls_are_neutralised_and_nothing_else_changes(
    hostile: str, shown: str
) -> None:
    assert mrkdwn_escape(hostile) == shown


@given(HOSTILE, st.integers(min_value=1, max_value=400))
@settings(max_examples=300, deadline=None)
def test_escaped_text_holds_no_live_markup_and_fits_its_limit(text: str, limit: int) -> None:
    out = mrkdwn_escape(text, limit, secrets=False)
    assert len(out) <= limit
    assert "<" not in out and ">" not in out
    assert not _BARE_AMPERSAND.search(out.removesuffix(ELLIPSIS)), "an escape was cut in half"
    assert _only_our_format_characters(out)
    assert "```" not in out
    if not out.endswith(ELLIPSIS) and BACKTICK_LOOKALIKE not in text:
        assert _unescape(out) == strip_controls(text, keep="\t\n")


@given(HOSTILE, st.integers(min_value=7, max_value=400))
@settings(max_examples=300, deadline=None)
def test_a_code_block_cannot_be_closed_from_inside(text: str, limit: int) -> None:
    block = code_block(text, limit, secrets=False)
    assert len(block) <= limit
    assert block.startswith("```") and block.endswith("```")
    body = block[3:-3]
    assert "`" not in body
    assert "<" not in body and ">" not in body
    assert _only_our_format_characters(body)


@given(HOSTILE, st.integers(min_value=1, max_value=200))
@settings(max_examples=200, deadline=None)
def test_plain_text_is_one_clean_non_empty_line_within_its_limit(text: str, limit: int) -> None:
    out = plain_text(text, limit, secrets=False)
    assert 1 <= len(out) <= limit
    assert "\n" not in out and _only_our_format_characters(out)


def test_a_cut_never_splits_an_escape() -> None:
    text = "a" * 2996 + "&<>"
    out = mrkdwn_escape(text, SECTION_TEXT_LIMIT)
    assert len(out) <= SECTION_TEXT_LIMIT and out.endswith("a" + ELLIPSIS)
    backticks = code_block("x" * 100 + "`" * 50, 120)
    assert "`" not in backticks[3:-3] and len(backticks) <= 120
    assert mrkdwn("&" * 100, limit=12) == "&amp;&amp;…"


def test_secrets_in_posted_text_are_masked() -> None:
    out = mrkdwn_escape("launching with HF_TOKEN=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789")
    assert "hf_aBcDe" not in out and "[REDACTED]" in out
    assert "hunter2" not in code_block("redis://:hunter2@cache:6379")


def test_headers_fit_slack_and_never_go_empty() -> None:
    assert len(plain_text("x" * 500)) == HEADER_TEXT_LIMIT
    assert plain_text("\x1b[0m\u202e") == "-"


def test_inline_code_is_one_line_without_backticks() -> None:
    assert inline_code("gpu-node-01\x1b]8;;http://x\x07click\x1b]8;;\x07") == "`gpu-node-01click`"
    assert inline_code("a`b\nc") == f"`a{BACKTICK_LOOKALIKE}b c`"
    assert len(inline_code("x" * 500, 40)) == 40


def test_only_plain_http_links_become_links() -> None:
    assert link("https://pytorch.org/docs?a=1&b=2", "docs <here>") == (
        "<https://pytorch.org/docs?a=1&amp;b=2|docs &lt;here&gt;>"
    )
    assert link("javascript:alert(1)", "click") == "click"
    assert link("https://x.example|<!channel>", "x") == "x"


@given(st.text(), st.integers(min_value=10, max_value=3000))
def test_any_unicode_text_fits_and_carries_no_markup(raw: str, limit: int) -> None:
    for rendered in (mrkdwn(raw, limit), code_block(raw, limit), inline_code(raw, limit)):
        assert len(rendered) <= limit
        assert "<" not in rendered and ">" not in rendered
