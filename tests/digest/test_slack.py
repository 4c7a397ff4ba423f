"""The digest posted to a Slack Web API over real HTTP (the fake of tests/fakes/slack_api.py), by the
CLI and by the scheduler inside `ncclbot serve`: the chat.postMessage and files_upload_v2 calls that
arrive are counted."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

from bot.settings import DAY_NAMES
from bot.store import Store
from tests.digest.history import seed_digest_history
from tests.digest.test_render import png_size
from tests.fakes.slack_api import FakeSlack, eventually
from tests.server.helpers import ROOT, clean_environment, running_server

CHANNEL = "C0TEAM"
AS_OF = "2026-11-29T12:00:00Z"
SECRET = "digest-test-signing-secret"


def post(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "digest", "--post", "--channel", CHANNEL, "--as-of", AS_OF],
        cwd=ROOT,
        env=clean_environment(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_cli_posts_the_digest_with_its_chart_in_the_thread(sqlite_url: str) -> None:
    with Store.open(sqlite_url) as store:
        seed_digest_history(store)
    with FakeSlack() as slack:
        env = {**slack.env(), "NCCLBOT_DATABASE_URL": sqlite_url}
        out, err = post(env).communicate(timeout=120)
        assert out.startswith(f"posted the digest 2026-W48 to {CHANNEL}"), err
        [call] = slack.calls_to("chat.postMessage")
        assert call.params["channel"] == CHANNEL
        assert call.blocks()[0]["text"]["text"] == "NCCL incident digest 2026-W48"
        assert "7 occurrences (3 the week before)" in call.params["text"]
        [message] = slack.top_level(CHANNEL)
        [upload] = slack.uploads()
        assert (upload.name, upload.channel, upload.thread_ts) == (
            "ncclbot-digest-2026-W48.png",
            CHANNEL,
            message["ts"],
        )
        assert png_size(upload.content) == (1200, 1000)
        assert len(slack.calls_to("files.completeUploadExternal")) == 1

        out, _ = post(env).communicate(timeout=120)
        assert out.startswith(
            f"the digest 2026-W48 was already posted to {CHANNEL} (message {message['ts']})"
        )
        assert len(slack.calls_to("chat.postMessage")) == 1


def test_three_concurrent_posts_reach_slack_once(database_url: str) -> None:
    with Store.open(database_url) as store:
        seed_digest_history(store)
    with FakeSlack() as slack:
        env = {**slack.env(), "NCCLBOT_DATABASE_URL": database_url}
        processes = [post(env) for _ in range(3)]
        outputs = [p.communicate(timeout=120) for p in processes]
        assert [p.returncode for p in processes] == [0, 0, 0], outputs
        assert len(slack.calls_to("chat.postMessage")) == 1
        assert len(slack.uploads()) == 1
        assert sum(out.startswith("posted the digest") for out, _ in outputs) == 1


def test_the_server_posts_the_digest_when_its_slot_comes(sqlite_url: str) -> None:
    with Store.open(sqlite_url) as store:
        seed_digest_history(store)  # an old history: this week's digest is mostly empty, still posted
    slot = (datetime.now(UTC) + timedelta(seconds=10)).replace(microsecond=0)
    with FakeSlack() as slack:
        env = {
            **slack.env(),
            "SLACK_SIGNING_SECRET": SECRET,
            "NCCLBOT_DATABASE_URL": sqlite_url,
            "NCCLBOT_DIGEST_CHANNELS": CHANNEL,
            "NCCLBOT_DIGEST_SCHEDULE": f"{DAY_NAMES[slot.weekday()]} {slot:%H:%M:%S}",
        }
        with running_server(env) as server:
            posts = eventually(
                lambda: [c for c in slack.calls_to("chat.postMessage") if c.params["channel"] == CHANNEL],
                timeout=40,
            )
            eventually(lambda: slack.uploads(), timeout=20)
            assert posts[0].blocks()[0]["text"]["text"].startswith("NCCL incident digest ")
            eventually(lambda: "posted the digest" in server.log(), timeout=20)  # logged after the upload
        assert len([c for c in slack.calls_to("chat.postMessage") if c.params["channel"] == CHANNEL]) == 1
