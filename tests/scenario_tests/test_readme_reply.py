"""The README shows a real reply: this test makes one (a log attached to an @mention, through a real
server and the fake Slack) and checks that deploy/slack/example-reply.md and the README's copy of it
are what the fake received. `NCCLBOT_UPDATE_EXAMPLES=1` rewrites both after a deliberate change."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.fakes.slack_api import FakeSlack, eventually, render_message
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import server_env
from tests.scenario_tests.flows import incident_messages
from tests.scenario_tests.logs import oom_log
from tests.server.helpers import running_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "slack" / "example-reply.md"
README = ROOT / "README.md"
BEGIN, END = "<!-- example-reply: begin -->", "<!-- example-reply: end -->"


def normalised(text: str) -> str:
    """Parts that change from run to run (timings, message timestamps) made stable."""
    text = re.sub(r"in \d+\.\d s", "in 0.1 s", text)
    text = re.sub(r"/p\d{16}", "/p1764000000000000", text)
    return re.sub(r"first seen \d{4}-\d\d-\d\d \d\d:\d\d UTC", "first seen 2026-12-01 03:00 UTC", text)


def conversation(tmp_path: Path) -> str:
    with FakeSlack() as slack, running_server(server_env(slack, tmp_path)) as server:
        channel = "C0MLINFRA"
        shared = [slack.add_file("train.log", oom_log(11))]
        asked = slack.post_user_message(channel, "<@UBOT> job 771204 died overnight", files=shared)
        send.event(server.url, send.mention(channel, asked["ts"], shared, text=asked["text"]))
        [incident] = eventually(lambda: incident_messages(slack, channel))
        [details] = eventually(lambda: slack.thread(channel, incident["ts"]))
        [answer] = eventually(
            lambda: [m for m in slack.thread(channel, asked["ts"]) if "Reading" not in m.get("text", "")]
        )
        parts = [
            ("A user posts a log and mentions the bot", asked["text"] + "  📎 train.log"),
            ("The bot's placeholder in that thread, edited into the result", render_message(answer)),
            ("The incident's top-level message", render_message(incident)),
            ("In the incident's thread", render_message(details)),
        ]
    # Four backticks: the replies contain ``` code blocks of their own.
    body = "\n\n".join(f"**{title}**\n\n````text\n{text}\n````" for title, text in parts)
    return normalised(body) + "\n"


def test_readme_shows_the_reply_the_fake_slack_received(tmp_path: Path) -> None:
    rendered = conversation(tmp_path)
    readme = README.read_text()
    if os.environ.get("NCCLBOT_UPDATE_EXAMPLES") == "1":
        EXAMPLE.write_text(rendered)
        start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
        README.write_text(readme[:start] + "\n" + rendered + readme[end:])
        readme = README.read_text()
    assert EXAMPLE.read_text() == rendered
    assert BEGIN + "\n" + rendered + END in readme
