"""Block Kit builders: within Slack's limits (checked by slack_sdk's own model validators), and no log
text can ping a channel, fake a link or break out of a code block."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

import runbooks
from bot.render import slack_blocks as kit
from bot.render import slack_incident, slack_replies, slack_views
from bot.render.slack_incident import Correction, IncidentView
from matcher.taxonomy import CLASSES

HOSTILE = "<!channel> <@U0BOSS> <https://evil.example|docs> & ```` `rm -rf` \x1b[31m\u202e"


def document(
    text: str = "torch.OutOfMemoryError: CUDA out of memory", host: str = "gpu-node-017", evidence: int = 3
) -> dict[str, Any]:
    return {
        "diagnoses": [
            {
                "class": "cuda/oom",
                "confidence": 0.91,
                "title": CLASSES["cuda/oom"],
                "evidence": [
                    {"source": f"rank{i}.log", "line": 100 + i, "text": text, "signature": f"sig-{i}"}
                    for i in range(evidence)
                ],
            },
            {"class": "system/host-oom", "confidence": 0.3, "title": "", "evidence": []},
        ],
        "culprit": {"ranks": [3], "hosts": [host], "reason": f"rank 3 ({host}) hit CUDA out of memory"},
        "symptom": "collective-timeout",
        "stats": {"bytes": 1_200_000_000, "lines": 9_000_000, "ranks": 64, "seconds": 4.2},
        "facts": {},
    }


def view(**kw: Any) -> IncidentView:
    fields: dict[str, Any] = {
        "document": document(),
        "runbook": runbooks.render_for("cuda/oom", {}),
        "incident_id": 42,
        "occurrences": 3,
        "recurrence": "3rd time on gpu-node-017 in 7 days; first seen 2026-11-24 03:11 UTC",
        "first_link": "https://slack.com/archives/C0INCIDENT/p1764000001000002",
        "job": "771204",
    }
    fields.update(kw)
    return IncidentView(**fields)


def valid(blocks: list[dict[str, Any]]) -> None:
    """slack_sdk's validators (text lengths, element counts) on every block, plus the message limits."""
    assert len(blocks) <= kit.MESSAGE_BLOCKS_LIMIT
    assert kit.text_length(blocks) <= 13_000
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.validate_json()


def mrkdwn_texts(blocks: list[dict[str, Any]]) -> list[str]:
    found = []
    for block in blocks:
        for item in [block.get("text"), *(block.get("fields") or []), *(block.get("elements") or [])]:
            if isinstance(item, dict) and item.get("type") == "mrkdwn":
                found.append(item["text"])
    return found


def test_incident_message_names_class_confidence_culprit_summary_recurrence_and_job() -> None:
    blocks = slack_incident.incident_blocks(view())
    valid(blocks)
    shown = "\n".join(mrkdwn_texts(blocks))
    assert blocks[0]["text"]["text"].startswith("cuda/oom — ")
    assert "*Confidence:* 0.91 (high)" in shown
    assert "rank `3` on `gpu-node-017`" in shown
    assert (
        "3rd time on gpu-node-017" in shown
        and "<https://slack.com/archives/C0INCIDENT/p1764000001000002|first>" in shown
    )
    assert "`771204`" in shown and "3× in this incident" in shown
    assert runbooks.render_for("cuda/oom", {}).summaries.executive[:40] in shown


@pytest.mark.parametrize("where", ["host", "text"])
def test_log_text_cannot_ping_or_fake_links(where: str) -> None:
    hostile = document(host=HOSTILE) if where == "host" else document(text=HOSTILE)
    incident = view(document=hostile, recurrence=None, first_link=None)
    blocks = slack_incident.incident_blocks(incident) + slack_incident.details_blocks(incident)[0]
    valid(blocks)
    for text in mrkdwn_texts(blocks):
        assert "<!" not in text and "<@U0BOSS" not in text and "<https://evil" not in text
        assert "\x1b" not in text and "\u202e" not in text
        assert text.count("```") % 2 == 0  # every code block is closed where it was opened
    assert "<!" not in slack_incident.headline_text(incident)


def test_correction_resolution_and_snooze_are_shown() -> None:
    corrected = view(
        correction=Correction(user="U0ALICE", corrected_class="system/host-oom", note="cgroup OOM")
    )
    shown = "\n".join(mrkdwn_texts(slack_incident.incident_blocks(corrected)))
    assert "Corrected by <@U0ALICE>" in shown and "`system/host-oom`" in shown and "cgroup OOM" in shown
    resolved = slack_incident.incident_blocks(view(status="resolved", resolved_by="U0BOB"))
    assert "resolved by <@U0BOB>" in "\n".join(mrkdwn_texts(resolved))
    assert "incident.resolve" not in json.dumps(resolved)
    snoozed = view(status="snoozed", snoozed_until=datetime(2026, 12, 2, 9, 0, tzinfo=UTC))
    assert "snoozed until 2026-12-02 09:00 UTC" in "\n".join(
        mrkdwn_texts(slack_incident.incident_blocks(snoozed))
    )


def test_buttons_carry_incident_and_node_and_fit_their_limits() -> None:
    long_host = "gpu-node-" + "9" * 200
    [actions] = [
        b
        for b in slack_incident.incident_blocks(view(document=document(host=long_host)))
        if b["type"] == "actions"
    ]
    Block.parse(actions).validate_json()  # type: ignore[union-attr]
    probe = next(e for e in actions["elements"] if e["action_id"] == kit.ACTION_PROBE)
    assert json.loads(probe["value"]) == {"incident": 42, "node": long_host}
    assert len(probe["text"]["text"]) <= 75


def test_long_details_are_cut_to_the_message_limits_and_say_so() -> None:
    big = view(document=document(text="x" * 5000, evidence=60))
    blocks, cut = slack_incident.details_blocks(big)
    valid(blocks)
    assert cut
    assert "the full report is attached" in mrkdwn_texts(blocks)[-1]


def test_fit_keeps_within_block_count_and_text_budget() -> None:
    many = [kit.section("y" * 2900) for _ in range(60)]
    fitted, cut = kit.fit(many)
    assert cut and kit.text_length(fitted) <= kit.MESSAGE_TEXT_BUDGET
    few = [kit.section("z") for _ in range(70)]
    fitted, cut = kit.fit(few)
    assert cut and len(fitted) == kit.MESSAGE_BLOCKS_LIMIT
    assert kit.fit([kit.section("ok")]) == ([kit.section("ok")], False)


def test_header_is_cut_to_150_characters() -> None:
    header = kit.header("h" * 400)
    assert len(header["text"]["text"]) == 150
    Block.parse(header).validate_json()  # type: ignore[union-attr]


def test_probe_reply_shows_verdict_reasons_and_busbw_table() -> None:
    result = {
        "verdict": "degraded",
        "backend": "nccl",
        "world_size": 8,
        "reasons": ["busbw 310 GB/s is 62% of the H100 baseline <!here>"],
        "results": [
            {"bytes": 1 << 20, "time_us": 80.0, "algbw_gbps": 13.1, "busbw_gbps": 22.9, "correct": True},
            {"bytes": 1 << 30, "time_us": 4000.0, "algbw_gbps": 268.4, "busbw_gbps": 310.2, "correct": True},
        ],
        "baseline_busbw_gbps": 500.0,
        "sku": "H100-SXM",
        "checks": [{"name": "xid", "status": "fail", "evidence": "Xid 79 in dmesg"}],
    }
    title, blocks = slack_replies.probe_blocks(result, node="gpu-node-017", requested_by="U0ALICE")
    valid(blocks)
    shown = "\n".join(mrkdwn_texts(blocks))
    assert "DEGRADED" in title and "310.200" in shown and "<!here>" not in shown and "Xid 79" in shown


def test_help_status_history_and_home_are_valid() -> None:
    valid(slack_replies.help_blocks()[1])
    valid(slack_replies.status_blocks([])[1])
    valid(slack_replies.history_blocks([], scope="all")[1])
    home = slack_views.home_view(incidents=[], lemons=[], figures={"days": 7})
    View(**home).validate_json()


def test_feedback_modal_offers_every_class() -> None:
    modal = slack_views.feedback_modal(
        incident_id=1, current_class="cuda/oom", classes=CLASSES, channel="C1", ts="1.2"
    )
    View(**modal).validate_json()
    options = [o["value"] for o in modal["blocks"][1]["element"]["options"]]
    assert options == list(CLASSES)


def test_diagnose_modal_takes_files_and_a_pasted_log() -> None:
    modal = slack_views.diagnose_modal(channel="C1", user="U1")
    assert [b["element"]["type"] for b in modal["blocks"]] == ["file_input", "plain_text_input"]
    assert json.loads(modal["private_metadata"]) == {"channel": "C1", "user": "U1"}
    assert re.fullmatch(r"[a-z.]+", modal["callback_id"])


def guess_document() -> dict[str, Any]:
    """A thin paste: one NCCL error line, classes from symptom priors only."""
    paste = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:47, unhandled system error"
    evidence = [{"source": "paste.txt", "line": 1, "text": paste, "signature": "nccl-system-error"}]
    return {
        "diagnoses": [
            {"class": "network/interface-selection", "confidence": 0.23, "title": "", "evidence": evidence},
            {"class": "shm/dev-shm", "confidence": 0.19, "title": "", "evidence": []},
            {"class": "unknown", "confidence": 0.12, "title": "", "evidence": []},
        ],
        "culprit": None,
        "symptom": "nccl-error",
        "stats": {"bytes": 80, "lines": 1, "ranks": 0, "seconds": 0.01},
        "facts": {},
    }


def test_a_guess_says_in_its_thread_what_would_settle_each_class() -> None:
    guess = view(document=guess_document(), runbook=runbooks.render_for("network/interface-selection", {}))
    blocks, _cut = slack_incident.details_blocks(guess)
    valid(blocks)
    [settle] = [t for t in mrkdwn_texts(blocks) if t.startswith("*What would settle it*")]
    assert "`network/interface-selection`" in settle and "`shm/dev-shm`" in settle
    assert "`unknown`" not in settle
    assert settle.index("interface-selection") < settle.index("dev-shm")  # the guess's own order
    assert "What would settle it (this is a guess)" in slack_incident.full_report(guess)


def test_a_sure_diagnosis_has_no_settle_section() -> None:
    blocks, _cut = slack_incident.details_blocks(view())
    assert not any("What would settle it" in t for t in mrkdwn_texts(blocks))
    assert "What would settle it" not in slack_incident.full_report(view())
