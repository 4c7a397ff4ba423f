"""Block Kit building blocks as plain dicts, with Slack's limits applied where the block is made, and the
action ids that buttons carry (the Slack front end routes on them).

Every text that may come from a log goes through `bot.render.slack_text` before it gets here; these
helpers only cut to the block's limit. `fit` keeps a whole message under the block count and the
undocumented ~13 000-character cumulative cap (`msg_blocks_too_long`).
"""

from __future__ import annotations

import json
from typing import Any

from bot.render.slack_text import (
    BUTTON_TEXT_LIMIT,
    CONTEXT_TEXT_LIMIT,
    HEADER_TEXT_LIMIT,
    MESSAGE_BLOCKS_LIMIT,
    SECTION_TEXT_LIMIT,
    plain_text,
)

Block = dict[str, Any]

# Cumulative text of one message's blocks; Slack refuses somewhat above 13 000 characters.
MESSAGE_TEXT_BUDGET = 12_000
VIEW_BLOCKS_LIMIT = 100
BUTTON_VALUE_LIMIT = 2000
OPTION_TEXT_LIMIT = 75
CONTEXT_ELEMENTS_LIMIT = 10

# Action ids: the contract between the buttons drawn here and the Slack listeners that handle them.
ACTION_ENGINEER = "incident.engineer"
ACTION_ONCALL = "incident.oncall"
ACTION_PROBE = "incident.probe"
ACTION_DRAIN = "incident.drain"
ACTION_REQUEUE = "incident.requeue"
ACTION_RESOLVE = "incident.resolve"
ACTION_SNOOZE = "incident.snooze"
ACTION_WRONG = "incident.wrong"
INCIDENT_ACTIONS = (
    ACTION_ENGINEER,
    ACTION_ONCALL,
    ACTION_PROBE,
    ACTION_DRAIN,
    ACTION_REQUEUE,
    ACTION_RESOLVE,
    ACTION_SNOOZE,
    ACTION_WRONG,
)

# Modals (callback ids) and their inputs (block id, action id).
VIEW_DIAGNOSE = "diagnose.modal"
VIEW_FEEDBACK = "feedback.modal"
INPUT_FILES = ("files", "files")
INPUT_PASTED = ("pasted", "pasted")
INPUT_CLASS = ("class", "class")
INPUT_NOTE = ("note", "note")


def header(text: str) -> Block:
    return {"type": "header", "text": {"type": "plain_text", "text": plain_text(text, HEADER_TEXT_LIMIT)}}


def section(mrkdwn_text: str, *, accessory: Block | None = None) -> Block:
    """`mrkdwn_text` must already be safe (built with slack_text); it is only cut to the limit here."""
    block: Block = {
        "type": "section",
        "text": {"type": "mrkdwn", "text": _cut(mrkdwn_text, SECTION_TEXT_LIMIT)},
    }
    if accessory is not None:
        block["accessory"] = accessory
    return block


def fields(*items: str) -> Block:
    return {
        "type": "section",
        "fields": [{"type": "mrkdwn", "text": _cut(item, 2000)} for item in items[:10]],
    }


def context(*mrkdwn_items: str) -> Block:
    elements = [{"type": "mrkdwn", "text": _cut(item, CONTEXT_TEXT_LIMIT)} for item in mrkdwn_items if item]
    return {"type": "context", "elements": elements[:CONTEXT_ELEMENTS_LIMIT]}


def divider() -> Block:
    return {"type": "divider"}


def button(text: str, action_id: str, value: dict[str, Any], *, style: str | None = None) -> Block:
    element: Block = {
        "type": "button",
        "text": {"type": "plain_text", "text": plain_text(text, BUTTON_TEXT_LIMIT)},
        "action_id": action_id,
        "value": json.dumps(value, separators=(",", ":"))[:BUTTON_VALUE_LIMIT],
    }
    if style in ("primary", "danger"):
        element["style"] = style
    return element


def actions(*elements: Block, block_id: str | None = None) -> Block:
    block: Block = {"type": "actions", "elements": list(elements)[:25]}
    if block_id:
        block["block_id"] = block_id
    return block


def option(text: str, value: str) -> Block:
    return {"text": {"type": "plain_text", "text": plain_text(text, OPTION_TEXT_LIMIT)}, "value": value[:150]}


def text_length(blocks: list[Block]) -> int:
    """Characters of text a layout carries (what Slack's cumulative cap counts, roughly)."""
    total = 0
    for block in blocks:
        total += sum(len(s) for s in _strings(block))
    return total


def fit(
    blocks: list[Block],
    *,
    budget: int = MESSAGE_TEXT_BUDGET,
    max_blocks: int = MESSAGE_BLOCKS_LIMIT,
    note: str = "_(cut to fit a Slack message; the full report is attached)_",
) -> tuple[list[Block], bool]:
    """The longest prefix of `blocks` within the block count and text budget, and whether anything was
    cut (then a context line saying so ends the message)."""
    kept: list[Block] = []
    used = 0
    closing = context(note)
    reserve = text_length([closing])
    for index, block in enumerate(blocks):
        size = text_length([block])
        last = index == len(blocks) - 1
        room_blocks = max_blocks - (0 if last else 1)
        room_text = budget - (0 if last else reserve)
        if len(kept) + 1 > room_blocks or used + size > room_text:
            return [*kept, closing], True
        kept.append(block)
        used += size
    return kept, False


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [
            s
            for key, item in value.items()
            if key in _TEXT_KEYS or isinstance(item, (dict, list))
            for s in _strings(item)
        ]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


_TEXT_KEYS = frozenset({"text", "value", "alt_text", "url"})


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
