"""The weekly digest as a Slack message: Block Kit blocks and a plain-text fallback.

Everything that came from logs or people (hostnames, residue templates and lines, fixes, user ids) goes
through `bot.render.slack_text`, and each section stays within Block Kit's limits: at most 50 blocks,
3000 characters a section. Lemon nodes each get a Drain button (`DRAIN_ACTION`; the Slack app asks
for confirmation, checks permissions and runs the cluster action).
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.model.digest import Digest
from bot.render.digest_text import counted, period_line, trend_text
from bot.render.slack_blocks import ACTION_DRAIN
from bot.render.slack_text import (
    BUTTON_TEXT_LIMIT,
    FALLBACK_TEXT_LIMIT,
    HEADER_TEXT_LIMIT,
    SECTION_TEXT_LIMIT,
    code_block,
    inline_code,
    mrkdwn,
    plain_text,
)

# The Slack app's Drain button (admin-only, audited): its value names an incident and the node, so the
# digest's button is handled exactly like the one under an incident message.
DRAIN_ACTION = ACTION_DRAIN
TREND_EMOJI = {"new": ":new:", "up": ":arrow_up:", "down": ":arrow_down:", "flat": ":left_right_arrow:"}
RESIDUE_IN_MESSAGE = 3
LINE_CHARS = 200
HOSTS_SHOWN = 3
HOST_CHARS = 80
NOTE_CHARS = 200
SLACK_USER_ID = re.compile(r"[UW][A-Z0-9]{2,20}")


def _section(text: str) -> dict[str, Any]:
    """`text` is already safe mrkdwn; cut to the section limit as a last guard."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:SECTION_TEXT_LIMIT]}}


def _hosts(hosts: tuple[str, ...]) -> str:
    if not hosts:
        return "no culprit node"
    shown = ", ".join(inline_code(h, HOST_CHARS) for h in hosts[:HOSTS_SHOWN])
    return shown if len(hosts) <= HOSTS_SHOWN else f"{shown} and {len(hosts) - HOSTS_SHOWN} more"


def _classes(digest: Digest) -> str:
    if not digest.classes:
        return "*Incidents by class*\nNone in either period."
    lines = [
        f"{TREND_EMOJI[c.trend]} {inline_code(c.class_id)} *{c.count}* ({c.previous} before, "
        f"{trend_text(c.count, c.previous, c.trend)}) · {c.gpu_hours:.1f} GPU-h"
        for c in digest.classes
    ]
    total = f"*{digest.total}* occurrences, {digest.total_previous} the week before"
    return "*Incidents by class*\n" + "\n".join(lines) + f"\n{total}"


def _fingerprints(digest: Digest) -> str:
    lines = [
        f"• {inline_code(f.class_id)} on {_hosts(f.hosts)}: *{f.count}x* this week ({f.previous} before), "
        f"latest incident #{f.incident_id}"
        for f in digest.fingerprints
    ]
    return "*Recurring failures*\n" + ("\n".join(lines) or "Nothing happened twice.")


def _lemon_blocks(digest: Digest) -> list[dict[str, Any]]:
    if not digest.lemons:
        return [_section("*Lemon nodes*\nNone this week.")]
    blocks = [_section("*Lemon nodes* (initiated incidents or failed probes)")]
    for node in digest.lemons:
        cluster = f" in {inline_code(node.cluster)}" if node.cluster else ""
        section = _section(
            f"{inline_code(node.hostname)}{cluster}: score {node.score:.1f}, "
            f"{counted(node.incidents, 'incident')}, {node.failed_probes}/{node.probe_runs} probes failed"
        )
        if node.incident_id is not None:  # the Slack app's drain acts on an incident and its node
            section["accessory"] = _drain_button(node.incident_id, node.hostname)
        blocks.append(section)
    return blocks


def _drain_button(incident_id: int, hostname: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": DRAIN_ACTION,
        "style": "danger",
        "text": {"type": "plain_text", "text": plain_text("Drain", BUTTON_TEXT_LIMIT)},
        "value": json.dumps({"incident": incident_id, "node": hostname}, separators=(",", ":"))[:2000],
        "confirm": {
            "title": {"type": "plain_text", "text": "Drain this node?"},
            "text": {"type": "mrkdwn", "text": f"No new jobs will start on {inline_code(hostname)}."},
            "confirm": {"type": "plain_text", "text": "Drain"},
            "deny": {"type": "plain_text", "text": "Cancel"},
        },
    }


def _costs_and_resolve(digest: Digest) -> str:
    costs = [
        f"{inline_code(c.class_id)} {c.gpu_hours:.1f}"
        + ("" if c.estimated == c.occurrences else f" ({c.estimated} of {c.occurrences} estimated)")
        for c in digest.costs
    ]
    resolve = [
        f"{inline_code(r.key)} median {r.median_hours:.1f} h over {r.resolved}" for r in digest.resolve
    ]
    return (
        f"*GPU-hours lost:* {digest.gpu_hours:.1f}\n"
        + ("\n".join(costs) or "none")
        + "\n*Time to resolve*\n"
        + ("\n".join(resolve) or "Nothing resolved this week.")
    )


def _stale(digest: Digest) -> str:
    lines = [
        f"• #{s.id} {inline_code(s.class_id)} on {_hosts(s.hosts)}: open {s.age_days} days, {s.occurrences}x"
        for s in digest.stale
    ]
    return f"*Open for more than {digest.stale_days} days*\n" + ("\n".join(lines) or "None.")


def _fixes(digest: Digest) -> str:
    lines = [
        f"• {mrkdwn(f.fix, LINE_CHARS)}: {f.held} held, {f.recurred} recurred, {f.pending} pending"
        for f in digest.fixes
    ]
    return "*Fixes* (held = no recurrence within 14 days)\n" + (
        "\n".join(lines) or "No resolution named a fix."
    )


def _user(user: str) -> str:
    """A Slack user id becomes a mention (it renders as the name, notifying nobody in a section);
    anything else is shown as code."""
    return f"<@{user}>" if SLACK_USER_ID.fullmatch(user) else inline_code(user)


def _corrections(digest: Digest) -> str:
    lines = [
        f"• #{c.incident_id} {inline_code(c.given)} → "
        f"{inline_code(c.corrected) if c.corrected else 'no class given'} by {_user(c.user)}"
        + (f": _{mrkdwn(c.note, NOTE_CHARS)}_" if c.note else "")
        for c in digest.corrections
    ]
    return "*Diagnoses corrected by users*\n" + ("\n".join(lines) or "None this week.")


def _residue_blocks(digest: Digest) -> list[dict[str, Any]]:
    if not digest.residue:
        return [_section("*Unrecognised log lines*\nNone this week.")]
    blocks = [
        _section(
            "*Unrecognised log lines* in unknown or low-confidence diagnoses; "
            "`ncclbot residue --signature ID` drafts a signature"
        )
    ]
    for t in digest.residue[:RESIDUE_IN_MESSAGE]:
        seen = f"{counted(t.occurrences, 'diagnosis', 'diagnoses')}, {counted(t.lines, 'line')}"
        head = f"*[{t.template_id}]* {seen}"
        body = code_block(f"{t.template}\n{t.example}", SECTION_TEXT_LIMIT - len(head) - 1)
        blocks.append(_section(f"{head}\n{body}"))
    return blocks


def digest_fallback(digest: Digest) -> str:
    worst = digest.classes[0].class_id if digest.classes else "none"
    text = (
        f"NCCL incident digest {digest.week}: {digest.total} occurrences ({digest.total_previous} the week"
        f" before), most frequent {worst}, {digest.gpu_hours:.1f} GPU-hours lost"
    )
    return text[:FALLBACK_TEXT_LIMIT]


def digest_blocks(digest: Digest) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {
                "type": "plain_text",
                "text": plain_text(f"NCCL incident digest {digest.week}", HEADER_TEXT_LIMIT),
            },
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": period_line(digest)}]},
        _section(_classes(digest)),
        _section(_fingerprints(digest)),
        *_lemon_blocks(digest),
        _section(_costs_and_resolve(digest)),
        _section(_stale(digest)),
        _section(_fixes(digest)),
        {"type": "divider"},
        {"type": "header", "text": {"type": "plain_text", "text": "What the bot learned"}},
        _section(_corrections(digest)),
        *_residue_blocks(digest),
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "Charts are in the thread."}]},
    ]
    return blocks
