"""Untrusted text made safe for Slack: nothing from a log can ping `@channel` or a user, fake a link,
break out of a code block, or overflow Block Kit's limits.

Slack's mrkdwn has three control characters, `&`, `<` and `>`: escaping them (and nothing else, since
Slack shows other entities literally) turns `<!channel>`, `<@U123>` and `<http://evil|docs>` into plain
text. Code fences have no escape for backticks, so backticks inside a block become a look-alike (ˋ).
Truncation happens on the raw text before escaping, so a cut never leaves half an `&amp;`.
"""

from __future__ import annotations

from bot.render.safe_text import strip_controls

ELLIPSIS = "…"
FENCE = "```"
_BACKTICK_LOOKALIKE = "ˋ"  # U+02CB MODIFIER LETTER GRAVE ACCENT
_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}

# Block Kit limits (Slack's documentation; slack_sdk's model validators use the same numbers).
SECTION_TEXT_LIMIT = 3000
HEADER_TEXT_LIMIT = 150
BUTTON_TEXT_LIMIT = 75
CONTEXT_TEXT_LIMIT = 3000
MESSAGE_BLOCKS_LIMIT = 50
FALLBACK_TEXT_LIMIT = 4000


def _escaped_length(char: str) -> int:
    return len(_ESCAPES.get(char, char))


def _escape(text: str) -> str:
    return "".join(_ESCAPES.get(char, char) for char in text)


def _fit(text: str, limit: int, cost: int = 0) -> str:
    """The longest prefix of `text` whose escaped form plus `cost` fits `limit` (with an ellipsis when
    cut). Works on raw characters so that an escape is never split."""
    total = sum(_escaped_length(c) for c in text) + cost
    if total <= limit:
        return _escape(text)
    budget = limit - cost - len(ELLIPSIS)
    out: list[str] = []
    used = 0
    for char in text:
        size = _escaped_length(char)
        if used + size > budget:
            break
        out.append(_ESCAPES.get(char, char))
        used += size
    return "".join(out) + ELLIPSIS


def mrkdwn(text: str, limit: int = SECTION_TEXT_LIMIT) -> str:
    """Untrusted text for a mrkdwn field: controls stripped, `&<>` escaped, cut to `limit`."""
    return _fit(strip_controls(text), limit)


def inline_code(text: str, limit: int = 200) -> str:
    """A short untrusted value (host, rank, file name) shown as `code`: one line, no backticks."""
    cleaned = strip_controls(text, keep_newlines=False).replace("`", _BACKTICK_LOOKALIKE)
    return f"`{_fit(cleaned, limit, cost=2)}`"


def code_block(text: str, limit: int = SECTION_TEXT_LIMIT) -> str:
    """Untrusted lines in a ``` block that they cannot close early."""
    cleaned = strip_controls(text).replace("`", _BACKTICK_LOOKALIKE)
    return f"{FENCE}{_fit(cleaned, limit, cost=2 * len(FENCE))}{FENCE}"


def plain_text(text: str, limit: int) -> str:
    """Text for a `plain_text` object (headers, buttons, options): Slack parses no markup there, so only
    controls are stripped and the length cut."""
    cleaned = strip_controls(text, keep_newlines=False)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - len(ELLIPSIS)] + ELLIPSIS


def prose(text: str, limit: int = SECTION_TEXT_LIMIT) -> str:
    """Untrusted free text inside a mrkdwn sentence: as `mrkdwn`, and backticks become a look-alike so
    that a stray ``` in a log line cannot open a code block over the rest of the message."""
    return mrkdwn(text.replace("`", _BACKTICK_LOOKALIKE), limit)
