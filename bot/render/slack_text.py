"""Untrusted text made safe for Slack: log lines, host names and file names posted into channels.

Pure functions, no Slack SDK. What they guarantee, whatever the input:
- no mention or link can be injected: `&`, `<` and `>` are escaped as `&amp;`, `&lt;`, `&gt;` (the only
  characters Slack's mrkdwn treats as control characters; no other HTML entity is ever produced, since
  Slack would show `&#39;` literally), which turns `<!channel>`, `<!here>`, `<!subteam^S1>`, `<@U123>`,
  `<#C123>` and fake links `<http://evil|click here>` into plain text; bare `@channel`, `@here` and
  `@everyone` get a word joiner after the `@`, so no client or `link_names` setting can resolve them;
- no control characters: escape sequences, C0/C1 controls, bidi overrides and zero-width characters are
  stripped (`strip_controls`), and credentials are masked (`redact`) as a second line of defence;
- no code block can be opened or closed from inside: inside `code_block` and `inline_code` every backtick
  becomes a look-alike (U+02CB), and in plain mrkdwn a run of three or more does;
- nothing exceeds the limit it is given (Slack's limits below), and a cut never splits an escape such as
  `&amp;` or a word-joined `@`; a cut text ends with "…".

Formatting characters (`*bold*`, `_italic_`, `~strike~`, single backticks) are left alone by `mrkdwn`:
they can restyle a log line but not notify anyone or hide a link, and mrkdwn cannot escape them. Use
`code_block` for verbatim log excerpts.
"""

from __future__ import annotations

import re

from matcher.analysis.redact import redact, strip_controls

# Slack's limits, in characters (Block Kit reference; slack_sdk's model validators use the same numbers).
SECTION_TEXT_LIMIT = 3000
FIELD_TEXT_LIMIT = 2000
HEADER_TEXT_LIMIT = 150
BUTTON_TEXT_LIMIT = 75
CONTEXT_TEXT_LIMIT = 3000
MESSAGE_BLOCKS_LIMIT = 50
FALLBACK_TEXT_LIMIT = 4000  # top-level `text` of a message with blocks (Slack truncates past 40,000)

ELLIPSIS = "…"
FENCE = "```"
BACKTICK_LOOKALIKE = "ˋ"  # U+02CB MODIFIER LETTER GRAVE ACCENT
_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_WORD_JOINER = "\u2060"
_SPECIAL = re.compile(r"(?P<fence>`{3,})|@(?=(?:channel|here|everyone)\b)", re.IGNORECASE)
_SAFE_URL = re.compile(r"https?://[^\s<>|]+\Z")


def _clean(text: str, *, secrets: bool, keep: str) -> str:
    return strip_controls(redact(text) if secrets else text, keep=keep)


def _pieces(text: str) -> list[str]:
    """`text` escaped, as indivisible pieces: a cut may fall between pieces, never inside one. A broadcast
    `@` travels with its word joiner; a run of backticks that could open a code block becomes look-alikes."""
    pieces: list[str] = []
    last = 0
    for match in _SPECIAL.finditer(text):
        pieces.extend(_ESCAPES.get(c, c) for c in text[last : match.start()])
        run = match.group("fence")
        pieces.extend([BACKTICK_LOOKALIKE] * len(run) if run else ["@" + _WORD_JOINER])
        last = match.end()
    pieces.extend(_ESCAPES.get(c, c) for c in text[last:])
    return pieces


def _join_within(pieces: list[str], limit: int | None) -> str:
    """Pieces joined, cut to `limit` characters (ellipsis included) at a piece boundary."""
    if limit is None or sum(len(p) for p in pieces) <= limit:
        return "".join(pieces)
    if limit < len(ELLIPSIS):
        raise ValueError("limit must be at least 1")
    out: list[str] = []
    size, budget = 0, limit - len(ELLIPSIS)
    for piece in pieces:
        if size + len(piece) > budget:
            break
        out.append(piece)
        size += len(piece)
    return "".join(out) + ELLIPSIS


def mrkdwn_escape(text: str, limit: int | None = None, *, secrets: bool = True, keep: str = "\t\n") -> str:
    """`text` as literal mrkdwn: it shows what it says, mentions and links are inert, at most `limit`
    characters. `keep` is the control characters left in (newlines and tabs by default)."""
    return _join_within(_pieces(_clean(text, secrets=secrets, keep=keep)), limit)


def mrkdwn(text: str, limit: int = SECTION_TEXT_LIMIT) -> str:
    """`mrkdwn_escape` within a section's limit: the usual call for a mrkdwn field."""
    return mrkdwn_escape(text, limit)


def _no_backticks(text: str) -> list[str]:
    return [BACKTICK_LOOKALIKE if piece == "`" else piece for piece in _pieces(text)]


def code_block(text: str, limit: int = SECTION_TEXT_LIMIT, *, secrets: bool = True) -> str:
    """Untrusted lines shown verbatim in a ``` block they cannot close early; the whole block, fences
    included, fits `limit`."""
    overhead = 2 * len(FENCE)
    if limit < overhead + len(ELLIPSIS):
        raise ValueError(f"a code block needs a limit of at least {overhead + len(ELLIPSIS)}")
    body = _join_within(_no_backticks(_clean(text, secrets=secrets, keep="\t\n")), limit - overhead)
    return f"{FENCE}{body or ' '}{FENCE}"


def inline_code(text: str, limit: int = 200, *, secrets: bool = True) -> str:
    """A short untrusted value (host, rank, file name) shown as `code`: one line, no backticks."""
    if limit < 2 + len(ELLIPSIS):
        raise ValueError("inline code needs a limit of at least 3")
    cleaned = " ".join(_clean(text, secrets=secrets, keep="").split())
    return f"`{_join_within(_no_backticks(cleaned), limit - 2) or ' '}`"


def plain_text(text: str, limit: int = HEADER_TEXT_LIMIT, *, secrets: bool = True) -> str:
    """For `plain_text` objects (headers, buttons, options), which Slack never parses: one line, no
    control characters, within `limit`, never empty (Slack refuses an empty text)."""
    cleaned = " ".join(_clean(text, secrets=secrets, keep="").split())
    return _join_within(list(cleaned), limit) or "-"


def link(url: str, label: str, limit: int = SECTION_TEXT_LIMIT) -> str:
    """`<url|label>` for a plain http(s) URL; anything else (another scheme, or a URL carrying `|`, `<`,
    `>` or spaces) becomes the escaped label alone, so a log value can never turn into a link."""
    label_text = mrkdwn_escape(label, keep="")
    candidate = f"<{url.replace('&', '&amp;')}|{label_text}>"
    if _SAFE_URL.match(url) and len(candidate) <= limit:
        return candidate
    return mrkdwn_escape(label, limit, keep="")


def prose(text: str, limit: int = SECTION_TEXT_LIMIT) -> str:
    """Untrusted free text inside a mrkdwn sentence: as `mrkdwn`, and single backticks become look-alikes
    too, so that log text cannot open an inline code span across the rest of the sentence."""
    return mrkdwn(text.replace("`", BACKTICK_LOOKALIKE), limit)
