"""Slack surfaces other than messages: the diagnose modal (files + pasted log), the wrong-diagnosis
modal (a select of the taxonomy + a note), and the App Home tab (open incidents, lemon nodes, last
week's figures)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bot.render import slack_blocks as kit
from bot.render.slack_blocks import Block
from bot.render.slack_replies import incident_line
from bot.render.slack_text import inline_code, plain_text, prose

# Slack's file_input takes at most 10 files per field.
MODAL_MAX_FILES = 10
PASTED_MAX_CHARS = 3000  # plain_text_input's own limit
NOTE_MAX_CHARS = 1000
HOME_INCIDENTS = 15
HOME_LEMONS = 10


def _input(
    block_id: str, label: str, element: Block, *, optional: bool = False, hint: str | None = None
) -> Block:
    block: Block = {
        "type": "input",
        "block_id": block_id,
        "label": {"type": "plain_text", "text": plain_text(label, 2000)},
        "element": element,
        "optional": optional,
    }
    if hint:
        block["hint"] = {"type": "plain_text", "text": plain_text(hint, 2000)}
    return block


def diagnose_modal(*, channel: str, user: str) -> Block:
    """`/nccl diagnose` without arguments. `private_metadata` carries where to answer."""
    files = {"type": "file_input", "action_id": kit.INPUT_FILES[1], "max_files": MODAL_MAX_FILES}
    pasted = {
        "type": "plain_text_input",
        "action_id": kit.INPUT_PASTED[1],
        "multiline": True,
        "max_length": PASTED_MAX_CHARS,
        "placeholder": {"type": "plain_text", "text": "…or paste the end of a log here"},
    }
    return {
        "type": "modal",
        "callback_id": kit.VIEW_DIAGNOSE,
        "title": {"type": "plain_text", "text": "Diagnose a failure"},
        "submit": {"type": "plain_text", "text": "Diagnose"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": json.dumps({"channel": channel, "user": user}),
        "blocks": [
            _input(
                kit.INPUT_FILES[0],
                "Log files",
                files,
                optional=True,
                hint="Per-rank logs, archives (.gz .zst .zip .tar) — up to 10 files",
            ),
            _input(kit.INPUT_PASTED[0], "Pasted log", pasted, optional=True),
        ],
    }


def feedback_modal(
    *, incident_id: int, current_class: str, classes: Mapping[str, str], channel: str, ts: str
) -> Block:
    """Wrong diagnosis: which class it should have been, and why."""
    options = [kit.option(f"{class_id} — {title}", class_id) for class_id, title in classes.items()]
    select = {
        "type": "static_select",
        "action_id": kit.INPUT_CLASS[1],
        "placeholder": {"type": "plain_text", "text": "The right class"},
        "options": options[:100],
    }
    note = {
        "type": "plain_text_input",
        "action_id": kit.INPUT_NOTE[1],
        "multiline": True,
        "max_length": NOTE_MAX_CHARS,
    }
    return {
        "type": "modal",
        "callback_id": kit.VIEW_FEEDBACK,
        "title": {"type": "plain_text", "text": "Wrong diagnosis"},
        "submit": {"type": "plain_text", "text": "Save"},
        "private_metadata": json.dumps({"incident": incident_id, "channel": channel, "ts": ts}),
        "blocks": [
            kit.section(f"Incident #{incident_id} was diagnosed as {inline_code(current_class)}."),
            _input(kit.INPUT_CLASS[0], "It should have been", select),
            _input(kit.INPUT_NOTE[0], "Note (what really happened)", note, optional=True),
        ],
    }


def home_view(
    *, incidents: Sequence[Any], lemons: Sequence[Any], figures: Mapping[str, Any], user: str | None = None
) -> Block:
    """The App Home tab. `incidents` are open IncidentSummary records, `lemons` LemonNode rows, and
    `figures` the `collect` figures of the last 7 days."""
    blocks: list[Block] = [kit.header("NCCL incidents")]
    blocks.append(kit.section(f"*Open incidents ({len(incidents)})*"))
    if incidents:
        blocks.append(kit.section("\n".join(incident_line(s) for s in incidents[:HOME_INCIDENTS])))
    else:
        blocks.append(kit.context("None open."))
    blocks.append(kit.divider())
    lemon_rows = [n for n in lemons if getattr(n, "is_lemon", False)][:HOME_LEMONS]
    blocks.append(kit.section(f"*Lemon nodes ({len(lemon_rows)})* — nodes that keep starting incidents"))
    if lemon_rows:
        lines = [
            f"{inline_code(n.hostname, 80)} — {n.incidents} incidents, {n.failed_probes} failed probes"
            f" (score {n.score:.1f})"
            for n in lemon_rows
        ]
        blocks.append(kit.section("\n".join(lines)))
    else:
        blocks.append(kit.context("None."))
    blocks.append(kit.divider())
    blocks.append(kit.section(f"*Last {figures.get('days', 7)} days*"))
    by_class = figures.get("recurrence_by_class") or []
    if by_class:
        lines = [
            f"{inline_code(str(r['key']))} {r['count']} (previous {r['previous']}, {r['trend']})"
            for r in by_class[:10]
        ]
        blocks.append(kit.section("\n".join(lines)))
    else:
        blocks.append(kit.context("No diagnoses."))
    lost = sum(float(r.get("gpu_hours") or 0) for r in figures.get("gpu_hours_lost_by_class") or [])
    mttr = next((m for m in figures.get("mttr") or [] if m.get("key") == "all"), None)
    summary = [f"GPU-hours lost (estimated): {lost:.0f}"]
    if mttr:
        summary.append(
            f"median time to resolve: {float(mttr['median_hours']):.1f} h ({mttr['resolved']} resolved)"
        )
    blocks.append(kit.context(*(prose(item) for item in summary)))
    return {"type": "home", "blocks": blocks[: kit.VIEW_BLOCKS_LIMIT]}
