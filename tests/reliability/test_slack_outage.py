"""A Slack outage: the fake Slack answers 500 to everything for a while, then 429 with Retry-After, then
recovers. Mentions keep being accepted meanwhile (the acknowledgement needs only the database); their
work is retried with backoff, without using up its attempts, and lands once Slack is back: each
placeholder once, one message per incident, and the repeats' "seen again" notes once each, in the order
the occurrences were recorded."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.fakes.slack_api import FakeSlack, blocks_text, eventually, wait_idle
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import server_env
from tests.scenario_tests.flows import incident_messages
from tests.scenario_tests.logs import next_culprit, oom_log
from tests.server.helpers import running_server


def mention(slack: FakeSlack, url: str, channel: str, rank: int) -> dict[str, Any]:
    shared = [slack.add_file("train.log", oom_log(rank))]
    asked = slack.post_user_message(channel, "<@UBOT> job died", files=shared)
    assert send.event(url, send.mention(channel, asked["ts"], shared)).status == 200
    return asked


def answered(slack: FakeSlack, channel: str, asked: dict[str, Any]) -> bool:
    replies = slack.thread(channel, asked["ts"])
    return bool(replies) and "cuda/oom" in blocks_text(replies[0].get("blocks") or [])


def test_posts_land_after_an_outage_once_each_and_in_order(tmp_path: Path) -> None:
    with FakeSlack() as slack, running_server(server_env(slack, tmp_path)) as server:
        rank, host = next_culprit()
        other_rank, other_host = next_culprit()
        first = mention(slack, server.url, "COUT0", rank)
        [incident] = eventually(lambda: incident_messages(slack, "COUT0"), timeout=60)
        wait_idle(slack, quiet=0.5)

        slack.outage(500)
        asked = {"COUT1": mention(slack, server.url, "COUT1", rank)}  # repeats of the incident
        asked["COUT2"] = mention(slack, server.url, "COUT2", rank)
        asked["COUT3"] = mention(slack, server.url, "COUT3", other_rank)  # a new incident
        asked["COUT4"] = mention(slack, server.url, "COUT4", rank)
        time.sleep(6)
        slack.outage(429, retry_after=1)
        time.sleep(4)
        failed = len(slack.calls)
        refused = len(slack.calls_to("chat.postMessage"))
        slack.recover()

        for channel, message in asked.items():
            eventually(lambda c=channel, m=message: answered(slack, c, m), timeout=180)
        wait_idle(slack, quiet=2.0, timeout=120)

    assert failed > 20  # the outage was felt: calls were refused and retried
    posts = [c.params for c in slack.calls_to("chat.postMessage")][refused:]  # what got through
    for channel, message in {"COUT0": first, **asked}.items():
        replies = slack.thread(channel, message["ts"])
        assert len(replies) == 1, (channel, replies)  # one placeholder, edited into the result
    top = [p for p in posts if not p.get("thread_ts")]
    [new_incident] = incident_messages(slack, "COUT3")
    assert len(top) == 1 and other_host in blocks_text(new_incident["blocks"])
    thread = [blocks_text(m.get("blocks") or []) for m in slack.thread("COUT0", incident["ts"])]
    notes = [t for t in thread if t.startswith("Seen again")]
    assert [n.split("(", 1)[1].split("×", 1)[0] for n in notes] == ["2", "3", "4"], thread
    assert sum("Evidence" in t for t in thread) == 1
    assert host in blocks_text(incident["blocks"])
