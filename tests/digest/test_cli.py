"""`ncclbot digest` and `ncclbot residue` as a user runs them (in-process `bot.cli.main`, exit status
and output checked)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import regex

import bot.server.main
from bot.cli import main
from bot.services.outlet import InMemoryOutlet
from bot.store import Store
from tests.digest.history import METADATA_1, METADATA_2, seed_digest_history
from tests.digest.test_render import png_size

AS_OF = "2026-11-29T12:00:00Z"


@pytest.fixture
def seeded(sqlite_url: str) -> str:
    """The CLI on SQLite; the store behind it is tested on both backends elsewhere."""
    with Store.open(sqlite_url) as store:
        seed_digest_history(store)
    return sqlite_url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_preview_prints_the_digest_and_writes_the_chart(
    seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "digest.png"
    status, out, _ = run(
        capsys, "digest", "--preview", "--as-of", AS_OF, "--chart", str(chart), "--database-url", seeded
    )
    assert status == 0
    assert out.startswith("NCCL incident digest 2026-W48\n7 days to 2026-11-29 12:00 UTC")
    assert "gpu-node-017 (west): score 3.0, 1 incident, 1/1 probes failed" in out
    assert png_size(chart.read_bytes()) == (1200, 1000)


def test_preview_json_is_the_report_of_its_window_with_week_and_channel(
    seeded: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCCLBOT_DIGEST_CHANNELS", "C0TEAM")
    status, out, _ = run(capsys, "digest", "--preview", "--json", "--as-of", AS_OF, "--database-url", seeded)
    assert status == 0
    digest = json.loads(out)
    _, report_out, _ = run(capsys, "report", "--json", "--as-of", AS_OF, "--database-url", seeded)
    report = json.loads(report_out)
    assert (digest["week"], digest["channel"]) == ("2026-W48", "C0TEAM")
    assert {key: digest[key] for key in report} == report
    assert [t["occurrences"] for t in digest["residue"]] == [2, 1]


def test_post_twice_in_a_week_posts_once_and_says_so(
    seeded: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    outlet = InMemoryOutlet()
    monkeypatch.setattr(bot.server.main, "build_outlet", lambda settings: outlet)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    argv = ("digest", "--post", "--channel", "C0TEAM", "--database-url", seeded)
    status, out, _ = run(capsys, *argv, "--as-of", "2026-11-30T09:00:00Z")
    assert (status, out.split(" (message")[0]) == (0, "posted the digest 2026-W49 to C0TEAM")
    status, out, _ = run(capsys, *argv, "--as-of", "2026-12-03T17:00:00Z")  # Thursday, same week
    assert status == 0
    assert out.startswith("the digest 2026-W49 was already posted to C0TEAM (message ")
    assert out.rstrip().endswith("not posted again")
    assert len(outlet.posted) == 1


def test_the_week_follows_the_channels_time_zone(
    seeded: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCCLBOT_DIGEST_CHANNELS", '[{"channel": "C0SYD", "timezone": "Australia/Sydney"}]')
    _, out, _ = run(
        capsys, "digest", "--preview", "--json", "--as-of", "2026-11-29T20:00:00Z", "--database-url", seeded
    )
    assert json.loads(out)["week"] == "2026-W49"  # Monday 07:00 in Sydney


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("digest", "--post", "--channel", "C0X"), "SLACK_BOT_TOKEN is not set: nowhere to post"),
        (("digest", "--post"), "no channel: pass --channel"),
        (("digest", "--post", "--json", "--channel", "C0X"), "--json and --chart go with --preview"),
        (("residue", "--signature", "999"), "no residue template 999"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    seeded: str, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    status, out, err = run(capsys, *argv, "--database-url", seeded)
    assert status == 2 and out == ""
    assert err.startswith(f"ncclbot: {message}") and err.count("\n") == 1


def test_residue_lists_templates_with_counts_and_examples(
    seeded: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "residue", "--json", "--as-of", AS_OF, "--database-url", seeded)
    assert status == 0
    [metadata, shard] = json.loads(out)["templates"]
    assert metadata["template"] == "Failed to reach metadata service at <IP> from <HOST> after <NUM> retries"
    assert (metadata["occurrences"], metadata["lines"], metadata["classes"]) == (2, 3, ["unknown"])
    assert sorted(metadata["examples"]) == sorted([METADATA_1, METADATA_2])
    assert shard["template"] == "Checkpoint shard <HEX> checksum mismatch on rank <NUM>"
    status, out, _ = run(capsys, "residue", "--days", "5", "--as-of", AS_OF, "--database-url", seeded)
    assert "1 diagnosis, 2 lines" in out  # the 6-day-old diagnosis is outside 5 days
    assert out.rstrip().endswith("draft a signature with `ncclbot residue --signature ID > file.toml`")


def test_residue_signature_is_a_skeleton_whose_pattern_matches_its_examples(
    seeded: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, listing, _ = run(capsys, "residue", "--json", "--as-of", AS_OF, "--database-url", seeded)
    template_id = json.loads(listing)["templates"][0]["id"]
    status, out, _ = run(capsys, "residue", "--signature", str(template_id), "--database-url", seeded)
    assert status == 0
    [signature] = tomllib.loads(out)["signature"]
    assert signature["id"] == f"residue-{template_id}"
    assert sorted(signature["match"]) == sorted([METADATA_1, METADATA_2])
    pattern = regex.compile(signature["pattern"])
    assert all(pattern.search(line) for line in signature["match"])
    assert not pattern.search("Failed to reach the metadata service")
    assert signature["keywords"] == ["Failed to reach metadata service at"]
    assert {"classes", "role", "description", "no_match"} <= set(signature)


def test_the_stale_incident_age_comes_from_the_settings(
    seeded: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCCLBOT_DIGEST_STALE_DAYS", "60")
    _, out, _ = run(capsys, "digest", "--preview", "--json", "--as-of", AS_OF, "--database-url", seeded)
    stale = json.loads(out)["open_incidents"]
    assert stale["older_than_days"] == 60
    assert [i["class"] for i in stale["incidents"]] == ["cuda/oom"]  # 100 days open; the 59-day one is not
