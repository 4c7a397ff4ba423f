"""Log text posted to Slack can neither ping, nor fake links, nor escape its code block, nor overflow."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.render.slack_text import code_block, inline_code, mrkdwn, plain_text


def test_broadcast_and_user_mentions_become_plain_text() -> None:
    text = mrkdwn("rank 3 says <!channel> and <!here> and <@U024BE7LH> see <http://evil.example|docs>")
    assert "<" not in text and ">" not in text
    assert "&lt;!channel&gt;" in text and "&lt;@U024BE7LH&gt;" in text


def test_only_the_three_control_characters_are_escaped() -> None:
    assert mrkdwn('a & b\'s "c"') == 'a &amp; b\'s "c"'


def test_backticks_cannot_close_a_code_block_early() -> None:
    block = code_block("line 1\n```\n<!channel> *bold*\n```")
    assert block.startswith("```") and block.endswith("```")
    assert block[3:-3].count("`") == 0


def test_terminal_escapes_and_bidi_overrides_are_stripped() -> None:
    assert mrkdwn("\x1b[31mred\x1b[0m \u202eevil\u202c") == "red evil"
    assert inline_code("gpu-node-01\x1b]8;;http://x\x07click\x1b]8;;\x07") == "`gpu-node-01click`"


def test_a_cut_never_splits_an_escape() -> None:
    text = mrkdwn("&" * 100, limit=12)
    assert text.endswith("…") and text.count("&amp;") == 2 and len(text) <= 12


def test_plain_text_is_cut_to_its_limit() -> None:
    assert plain_text("x" * 200, 150) == "x" * 149 + "…"


@given(st.text(), st.integers(min_value=10, max_value=3000))
def test_escaped_text_always_fits_and_never_carries_markup(raw: str, limit: int) -> None:
    for rendered in (mrkdwn(raw, limit), code_block(raw, limit)):
        assert len(rendered) <= limit
        assert "<" not in rendered and ">" not in rendered
