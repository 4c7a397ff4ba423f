"""The digest rendered: Block Kit within Slack's limits with a Drain button per lemon node, hostile log
text made harmless, and the chart a PNG of the promised size."""

from __future__ import annotations

import json
import struct
from dataclasses import replace

import pytest

from bot.model.digest import Digest, FixLine, Grid, LemonLine, ResidueLine, StaleIncident
from bot.render.digest_blocks import DRAIN_ACTION, digest_blocks, digest_fallback
from bot.render.digest_charts import CHART_SIZE, digest_chart_png
from bot.render.digest_text import digest_text
from bot.render.slack_text import MESSAGE_BLOCKS_LIMIT, SECTION_TEXT_LIMIT
from bot.services.digest import build_digest
from bot.services.digest.figures import STALE_LIMIT
from bot.store import Store
from tests.digest.history import NOW, WEEK, seed_digest_history

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def empty_digest() -> Digest:
    nothing = Grid((), (), ())
    return Digest(
        week=WEEK,
        channel=None,
        as_of=NOW,
        days=7,
        classes=(),
        fingerprints=(),
        lemons=(),
        costs=(),
        resolve=(),
        stale_days=7,
        stale=(),
        fixes=(),
        corrections=(),
        residue=(),
        weekly=Grid((), tuple(f"2026-W{w}" for w in range(41, 49)), ()),
        heatmap=nothing,
    )


@pytest.fixture
def seeded_digest(sqlite_url: str) -> Digest:
    with Store.open(sqlite_url) as store:
        seed_digest_history(store)
        return build_digest(store, week=WEEK, channel="C0DIGEST", as_of=NOW, stale_days=7)[1]


def _texts(blocks: list[dict]) -> list[str]:
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(blocks)
    return found


def test_blocks_stay_within_block_kit_limits(seeded_digest: Digest) -> None:
    blocks = digest_blocks(seeded_digest)
    assert len(blocks) <= MESSAGE_BLOCKS_LIMIT
    assert all(len(b["text"]["text"]) <= SECTION_TEXT_LIMIT for b in blocks if b["type"] == "section")
    assert len(json.dumps(blocks)) < 12_000  # Slack's undocumented cumulative cap (msg_blocks_too_long)
    assert blocks[0]["text"]["text"] == "NCCL incident digest 2026-W48"
    assert "7 occurrences (3 the week before)" in digest_fallback(seeded_digest)


def test_each_lemon_node_has_a_drain_button_naming_it_and_its_latest_incident(seeded_digest: Digest) -> None:
    probed_only = LemonLine("gpu-node-099", None, 2.0, 0, 1, 1)  # a failed probe, no incident to act on
    blocks = digest_blocks(replace(seeded_digest, lemons=(*seeded_digest.lemons, probed_only)))
    buttons = [b["accessory"] for b in blocks if "accessory" in b]
    assert [b["action_id"] for b in buttons] == [DRAIN_ACTION]
    assert json.loads(buttons[0]["value"]) == {"incident": 8, "node": "gpu-node-017"}  # oom-3's incident
    assert buttons[0]["style"] == "danger" and "confirm" in buttons[0]
    assert any("gpu-node-099" in t for t in _texts(blocks))


def test_log_text_cannot_ping_link_or_break_out_of_code(seeded_digest: Digest) -> None:
    hostile = ResidueLine(
        template_id=9,
        template="<!channel> <http://evil.example|click> ``` done",
        occurrences=1,
        lines=1,
        classes=("unknown",),
        example="@here <@U123> &amp; ```",
    )
    node = LemonLine("<!here>", "<http://x|y>", 3.0, 2, 0, 0, incident_id=1)
    text = " ".join(_texts(digest_blocks(replace(seeded_digest, residue=(hostile,), lemons=(node,)))))
    for forbidden in ("<!channel>", "<!here>", "<http://", "<@U123>"):
        assert forbidden not in text
    assert "&lt;!channel&gt;" in text and "&lt;!here&gt;" in text
    residue_block = next(
        t for t in _texts(digest_blocks(replace(seeded_digest, residue=(hostile,)))) if "[9]" in t
    )
    assert (
        residue_block.count("```") == 2
    )  # the fence opens and closes once; the log's backticks are look-alikes


def test_terminal_text_shows_the_figures(seeded_digest: Digest) -> None:
    text = digest_text(seeded_digest)
    assert "NCCL incident digest 2026-W48 for C0DIGEST" in text
    assert "  cuda/oom                                 3       1  up +2       4.0" in text
    assert "#8 cuda/oom -> system/host-oom (by U0ALICE): dmesg shows the cgroup OOM killer" in text
    assert (
        "[1] 2 diagnoses, 3 lines: Failed to reach metadata service at <IP> from <HOST> after <NUM> retries"
        in text
    )


def test_terminal_text_strips_escape_sequences(seeded_digest: Digest) -> None:
    hostile = LemonLine("gpu\x1b[2J\x1b]0;pwned\x07-1", None, 3.0, 2, 0, 0)
    assert "\x1b" not in digest_text(replace(seeded_digest, lemons=(hostile,)))


def test_the_chart_is_a_png_of_the_promised_size(seeded_digest: Digest) -> None:
    assert png_size(digest_chart_png(seeded_digest)) == CHART_SIZE == (1200, 1000)


def test_an_empty_week_still_charts() -> None:
    assert png_size(digest_chart_png(empty_digest())) == CHART_SIZE
    assert "none in either period" in digest_text(empty_digest())
    assert len(digest_blocks(empty_digest())) <= MESSAGE_BLOCKS_LIMIT


def test_the_same_digest_gives_the_same_chart_bytes(seeded_digest: Digest) -> None:
    assert digest_chart_png(seeded_digest) == digest_chart_png(seeded_digest)


def test_chart_labels_are_not_read_as_math(seeded_digest: Digest) -> None:
    odd = replace(seeded_digest, heatmap=Grid(("node-$x$^{9}",), ("cuda/oom",), ((2,),)))
    assert png_size(digest_chart_png(odd)) == CHART_SIZE


def test_long_lists_of_hosts_and_fixes_keep_every_section_within_its_limit(seeded_digest: Digest) -> None:
    many_hosts = tuple(f"gpu-node-{i:03d}.very-long-cluster-domain.example.com" for i in range(64))
    stale = tuple(StaleIncident(i, "network/ib-rdma", many_hosts, NOW, 3, 30) for i in range(STALE_LIMIT))
    fixes = tuple(FixLine("replaced the cable " + "x" * 3000, 1, 0, 0) for _ in range(8))
    blocks = digest_blocks(replace(seeded_digest, stale=stale, fixes=fixes))
    sections = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert all(len(text) <= SECTION_TEXT_LIMIT for text in sections)
    stale_section = next(text for text in sections if text.startswith("*Open for more than"))
    assert stale_section.count("and 61 more") == len(stale)
