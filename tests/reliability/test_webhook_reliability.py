"""The job-failure webhook under load, a crash, replays and hostile logs, through a real `ncclbot serve`
and the fake Slack (posts counted there): every accepted event is posted once, none twice, none lost."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from bot.store import Store
from bot.store.queue import WorkQueue
from tests.fakes.slack_api import FakeSlack, blocks_text, eventually, wait_idle
from tests.reliability.hostile import INPUTS, leaks, strings
from tests.reliability.load import SLACK_ACK_S, concurrently, percentile
from tests.reliability.webhooks import CHANNEL, job_event, post, posts_per_job, send, signed, webhook_env
from tests.server.helpers import running_server

WEBHOOKS, CLIENTS = 60, 20  # benchmarks/server_load.py: 200 from 50


def test_webhooks_from_many_clients_are_all_accepted_and_each_posted_once(tmp_path: Path) -> None:
    jobs = [str(1000 + index) for index in range(WEBHOOKS)]
    with FakeSlack() as slack:
        env = webhook_env(slack, f"sqlite:///{tmp_path / 'bot.db'}")
        with running_server(env) as server:
            answers = concurrently([lambda j=j: send(server.url, job_event(j)) for j in jobs], CLIENTS)
            assert [a.status for a in answers] == [202] * WEBHOOKS
            assert percentile([a.seconds for a in answers], 99) < SLACK_ACK_S
            eventually(lambda: len(posts_per_job(slack)) == WEBHOOKS, timeout=240)
            wait_idle(slack, quiet=2.0, timeout=60)
    assert posts_per_job(slack) == Counter(jobs)


def test_every_webhook_is_posted_exactly_once_after_a_kill_minus_nine(tmp_path: Path) -> None:
    jobs = [str(2000 + index) for index in range(100)]
    with FakeSlack() as slack:
        env = webhook_env(slack, f"sqlite:///{tmp_path / 'bot.db'}")
        with running_server(env) as first:
            answers = concurrently([lambda j=j: send(first.url, job_event(j)) for j in jobs], 20)
            assert [a.status for a in answers] == [202] * len(jobs)
            eventually(lambda: len(posts_per_job(slack)) >= 3, timeout=60)  # work under way
            first.process.kill()
            first.process.wait(timeout=10)
        assert len(posts_per_job(slack)) < len(jobs)  # the crash interrupted work in progress
        with running_server(env):
            eventually(lambda: len(posts_per_job(slack)) == len(jobs), timeout=240)
            time.sleep(4)  # over a lease: anything that would post twice has had its chance
            wait_idle(slack, quiet=1.0, timeout=60)
    assert posts_per_job(slack) == Counter(jobs)
    for message in (m for m in slack.top_level(CHANNEL) if m.get("bot_id")):
        thread = [blocks_text(m.get("blocks") or []) for m in slack.thread(CHANNEL, message["ts"])]
        assert sum("Evidence" in t for t in thread) == 1 and not any("Seen again" in t for t in thread)


def test_a_replayed_webhook_is_refused_and_a_fresh_send_of_the_same_job_posts_nothing_new(
    tmp_path: Path,
) -> None:
    with (
        FakeSlack() as slack,
        running_server(webhook_env(slack, f"sqlite:///{tmp_path / 'bot.db'}")) as server,
    ):
        body, headers = signed(job_event("3001"))
        assert post(server.url, body, headers).status == 202
        again = post(server.url, body, headers)  # the same signed bytes, within the 5 minutes
        assert again.status == 401 and "replayed" in again.body["error"]
        eventually(lambda: posts_per_job(slack) == Counter({"3001": 1}), timeout=60)
        time.sleep(1.1)  # a new second: a new signature
        fresh = send(server.url, job_event("3001"))  # the sender retries, signing anew: accepted
        assert fresh.status == 202 and fresh.body["accepted"][0]["duplicate"] is True
        wait_idle(slack, quiet=1.0)
    assert posts_per_job(slack) == Counter({"3001": 1})
    [message] = [m for m in slack.top_level(CHANNEL) if m.get("bot_id")]
    assert len(slack.thread(CHANNEL, message["ts"])) == 1  # its evidence, nothing new


def test_hostile_logs_inline_in_a_webhook_are_answered_and_leak_nothing(tmp_path: Path) -> None:
    """Part A's inputs that are text travel inline; the others (archives, dumps, bombs) as log paths
    under NCCLBOT_WEBHOOK_LOG_ROOTS."""
    roots = tmp_path / "logs"
    roots.mkdir()
    env = webhook_env(
        slack := FakeSlack(), f"sqlite:///{tmp_path / 'bot.db'}", NCCLBOT_WEBHOOK_LOG_ROOTS=str(roots)
    )
    with slack, running_server(env) as server:
        jobs = {}
        for index, hostile in enumerate(INPUTS):
            job = str(4000 + index)
            data = hostile.make()
            document = job_event(job)
            try:
                text = data.decode("utf-8")
                document["logs"] = [{"name": hostile.filename, "text": text}]
            except UnicodeDecodeError:
                folder = roots / job
                folder.mkdir()
                (folder / hostile.filename).write_bytes(data)
                del document["logs"]
                document["log_paths"] = [str(folder / hostile.filename)]
            answer = send(server.url, document)
            assert answer.status == 202, (hostile.name, answer.body)
            jobs[job] = hostile
        results = eventually(lambda: finished(tmp_path / "bot.db", len(jobs)), timeout=300)
        wait_idle(slack, quiet=1.0, timeout=120)
        log = server.log()
    for job, hostile in jobs.items():
        result = results[f"prod-a/{job}/0"]
        if hostile.diagnosed is None:  # posted as "not diagnosed", saying why in one line
            assert result["class"] is None and result["problem"] and "\n" not in result["problem"], result
        else:
            assert result["class"] == hostile.diagnosed, (hostile.name, result)
    for call in slack.calls_to("chat.postMessage") + slack.calls_to("chat.update"):
        for text, live in strings(call.params):
            assert leaks(text, mrkdwn=live) == [], (call.method, text[:300])
    assert "Traceback" not in log, log[-3000:]


def finished(database: Path, count: int) -> dict[str, dict]:
    """The results of the job-failure events once all `count` are done (else {})."""
    with Store.open(f"sqlite:///{database}") as store:
        items = [i for i in WorkQueue(store).items() if i.kind == "job-failed"]
    done = {i.key: i.result or {} for i in items if i.status == "done"}
    return done if len(done) == count else {}
