"""Crash consistency for Slack: `kill -9` of the server while 100 mentions with logs are queued or
being diagnosed; after a restart every one is answered exactly once, counted at the fake Slack: one
placeholder in each asker's thread (edited into the result), one message per incident, and in its thread
the evidence once and one "seen again" per repeat. (The 100 jobs fail on 32 hosts: 32 incidents.)"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from bot.store import Store
from bot.store.queue import WorkQueue
from tests.fakes.slack_api import FakeSlack, blocks_text, eventually, wait_idle
from tests.reliability.load import concurrently
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import server_env
from tests.scenario_tests.logs import next_culprit, oom_log
from tests.server.helpers import running_server

EVENTS = 100


def answered(slack: FakeSlack, channel: str, asked: dict[str, Any]) -> bool:
    """The asker's placeholder has become the result line."""
    replies = slack.thread(channel, asked["ts"])
    return bool(replies) and "cuda/oom" in blocks_text(replies[0].get("blocks") or [])


def unfinished(database: Path) -> list[tuple[Any, ...]]:
    """The queue's items not done, to say in a failure what was stuck and why."""
    with Store.open(f"sqlite:///{database}") as store:
        items = WorkQueue(store).items()
    return [(i.id, i.kind, i.status, i.attempts, i.last_error) for i in items if i.status != "done"]


def test_every_event_is_posted_exactly_once_after_a_kill_minus_nine(tmp_path: Path) -> None:
    with FakeSlack() as slack:
        env = server_env(slack, tmp_path, NCCLBOT_WORK_LEASE_S="2")
        asked: dict[str, tuple[dict[str, Any], list[dict[str, Any]], str]] = {}
        for index in range(EVENTS):
            rank, host = next_culprit()
            shared = [slack.add_file("train.log", oom_log(rank))]
            channel = f"CCRASH{index:03d}"
            asked[channel] = (
                slack.post_user_message(channel, "<@UBOT> job died", files=shared),
                shared,
                host,
            )
        with running_server(env) as first:
            calls = [
                (lambda c=c, m=m, s=s: send.event(first.url, send.mention(c, m["ts"], s)))
                for c, (m, s, _h) in asked.items()
            ]
            replies = concurrently(calls, 20)
            assert [r.status for r in replies] == [200] * EVENTS  # every event accepted
            eventually(lambda: len(slack.calls_to("download")) >= 3, timeout=60)  # work under way
            first.process.kill()  # SIGKILL: no clean shutdown
            first.process.wait(timeout=10)
        before = sum(answered(slack, c, m) for c, (m, _s, _h) in asked.items())
        assert before < EVENTS  # the crash did interrupt work in progress

        with running_server(env) as second:
            try:
                for channel, (message, _s, _h) in asked.items():
                    eventually(lambda c=channel, m=message: answered(slack, c, m), timeout=240)
            except AssertionError as error:
                logged = second.log().splitlines()
                warnings = [line for line in logged if "WARNING" in line or "ERROR" in line]
                stuck = unfinished(tmp_path / "store.sqlite3")
                raise AssertionError(f"{error}; unfinished {stuck}; last warnings {warnings[-20:]}") from None
            wait_idle(slack, quiet=2.0, timeout=120)

        posts = [c.params for c in slack.calls_to("chat.postMessage")]
        for channel, (message, _s, _h) in asked.items():
            in_thread = [p for p in posts if p["channel"] == channel and p.get("thread_ts") == message["ts"]]
            assert len(in_thread) == 1, (channel, in_thread)  # one placeholder, edited into the result
        top_level = [p for p in posts if not p.get("thread_ts")]
        hosts = Counter(host for _m, _s, host in asked.values())
        assert len(top_level) == len(hosts)  # one message per incident
        for channel in {p["channel"] for p in top_level}:
            for incident in (m for m in slack.top_level(channel) if m.get("bot_id")):
                host = next(h for h in hosts if f"`{h}`" in blocks_text(incident["blocks"]))
                thread = [blocks_text(m.get("blocks") or []) for m in slack.thread(channel, incident["ts"])]
                evidence = [t for t in thread if "Evidence" in t]
                again = sorted(
                    int(t.split("(", 1)[1].split("×", 1)[0]) for t in thread if t.startswith("Seen again")
                )
                assert len(evidence) == 1, (host, thread)
                assert again == list(range(2, hosts[host] + 1)), (host, thread)  # each repeat once
