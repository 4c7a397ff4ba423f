"""The server under load: `ncclbot serve` against the tests' fake Slack on loopback, with figures printed
beside a baseline measured in the same run (these machines are noisy; read the ratios).

    python benchmarks/server_load.py [--commands 50] [--uploads 20] [--upload-mb 30] [--events 100]
                                     [--webhooks 200 --webhook-clients 50] [--only commands uploads ...]

- commands: N signed `/nccl status` and `/nccl help` from N concurrent clients; every acknowledgement
  must come within Slack's 3 s (p50 / p99 / max printed; baseline: one `/nccl help` alone).
- uploads: N @mentions, each with its own large log, sent at once; the diagnosis concurrency limit
  (NCCLBOT_DIAGNOSIS_CONCURRENCY, 2) queues the rest, and their placeholders say so. Peak RSS of the
  server (sampled from /proc) against its idle RSS and against the peak of one upload of the same size.
- crash: N mentions accepted, the server killed with SIGKILL while they are queued or in flight, then
  restarted: how many were answered before, how long the rest took, and whether each was posted once.
- webhooks: N signed job-failure webhooks from C concurrent clients (accept p50 / p99), all processed,
  none lost or posted twice (counted at the fake Slack).

The same scenarios run in CI with smaller counts (tests/reliability/); this script asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.slack_api import FakeSlack, blocks_text, eventually, wait_idle  # noqa: E402
from tests.reliability.load import (  # noqa: E402
    SLACK_ACK_S,
    concurrently,
    memory,
    percentile,
    slash_commands,
    uploads_at_once,
)
from tests.reliability.webhooks import job_event, posts_per_job, webhook_env  # noqa: E402
from tests.reliability.webhooks import send as send_webhook  # noqa: E402
from tests.scenario_tests import slack_requests as send  # noqa: E402
from tests.scenario_tests.conftest import server_env  # noqa: E402
from tests.scenario_tests.logs import next_culprit, oom_log  # noqa: E402
from tests.server.helpers import running_server  # noqa: E402

MB = 1000 * 1000


def commands(count: int) -> None:
    with (
        tempfile.TemporaryDirectory() as folder,
        FakeSlack() as slack,
        running_server(server_env(slack, Path(folder))) as server,
    ):
        slash_commands(server.url, 4, 4)  # warm-up
        alone = statistics.median(send.command(server.url, "help", channel="CB").seconds for _ in range(10))
        figures = slash_commands(server.url, count, count)
        handled = handled_ms(server.log(), "/slack/events")[14:]
    ok = figures.statuses.count(200)
    late = sum(s >= SLACK_ACK_S for s in figures.seconds)
    p50, p99, worst = (1000 * v for v in (figures.p50, figures.p99, max(figures.seconds)))
    print(
        f"commands: {count} at once from {count} clients: {ok}/{count} acknowledged (200), {late} over 3 s; "
        f"p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {worst:.0f} ms (in the server p99 "
        f"{percentile(handled, 99):.0f} ms) "
        f"(baseline: one /nccl help alone {alone * 1000:.1f} ms; p99/baseline {figures.p99 / alone:.0f}x)"
    )


def uploads(count: int, size_mb: float) -> None:
    size = int(size_mb * MB)
    with (
        tempfile.TemporaryDirectory() as folder,
        FakeSlack() as slack,
        running_server(server_env(slack, Path(folder))) as server,
    ):
        pid = server.process.pid
        slash_commands(server.url, 4, 4)  # warm-up: the first request's set-up is not an upload's cost
        idle = memory(pid).rss
        one = uploads_at_once(slack, server.url, pid, count=1, size=size, prefix="CBONE")
        many = uploads_at_once(slack, server.url, pid, count=count, size=size, prefix="CBMANY")
    queued = sum("queued:" in text for text in many.placeholders)
    ack_p99 = percentile(many.acks, 99) * 1000
    print(
        f"uploads: {count} x {size_mb:g} MB at once ({count * size_mb:g} MB): acknowledged p99 "
        f"{ack_p99:.0f} ms, {queued}/{count} placeholders said 'queued', all answered in "
        f"{many.answered_s:.1f} s (one alone: {one.answered_s:.1f} s); server RSS idle {idle / MB:.0f} MB, "
        "peak with one "
        f"{one.peak_rss / MB:.0f} MB (+{(one.peak_rss - idle) / MB:.0f}), with {count} at once "
        f"{many.peak_rss / MB:.0f} MB (+{(many.peak_rss - idle) / MB:.0f})"
    )


def crash(count: int) -> None:
    with tempfile.TemporaryDirectory() as folder, FakeSlack() as slack:
        env = server_env(slack, Path(folder), NCCLBOT_WORK_LEASE_S="2")
        asked = {}
        for index in range(count):
            rank, _host = next_culprit()
            shared = [slack.add_file("train.log", oom_log(rank))]
            channel = f"CBCRASH{index:03d}"
            asked[channel] = (slack.post_user_message(channel, "<@UBOT>", files=shared), shared)

        def answered(channel: str) -> bool:
            replies = slack.thread(channel, asked[channel][0]["ts"])
            return bool(replies) and "cuda/oom" in blocks_text(replies[0].get("blocks") or [])

        with running_server(env) as first:
            calls = [
                (lambda c=c, m=m, s=s: send.event(first.url, send.mention(c, m["ts"], s)))
                for c, (m, s) in asked.items()
            ]
            accepted = sum(r.status == 200 for r in concurrently(calls, 20))
            eventually(lambda: len(slack.calls_to("download")) >= 3, timeout=60)
            first.process.kill()
            first.process.wait(timeout=10)
        before = sum(answered(c) for c in asked)
        started = time.monotonic()
        with running_server(env):
            for channel in asked:
                eventually(lambda c=channel: answered(c), timeout=600)
            recovered = time.monotonic() - started
            wait_idle(slack, quiet=2.0, timeout=120)
    posts = [c.params for c in slack.calls_to("chat.postMessage")]
    twice = sum(
        len([p for p in posts if p["channel"] == c and p.get("thread_ts") == m["ts"]]) != 1
        for c, (m, _s) in asked.items()
    )
    print(
        f"crash: {accepted}/{count} accepted, SIGKILL with {count - before} unanswered; after the restart "
        f"all answered in {recovered:.1f} s; askers answered other than once: {twice}"
    )


def handled_ms(log: str, path: str) -> list[float]:
    """The server's own handling time of each request to `path`, from its access log lines (the client's
    figure adds the HTTP round trip and the 50 client threads' share of these two cores)."""
    pattern = re.compile(rf"POST {re.escape(path)} \d+ ([\d.]+) ms")
    return [float(found) for found in pattern.findall(log)]


def webhooks(count: int, clients: int) -> None:
    jobs = [str(10_000 + index) for index in range(count)]
    with tempfile.TemporaryDirectory() as folder, FakeSlack() as slack:
        env = webhook_env(slack, f"sqlite:///{Path(folder) / 'bot.db'}")
        with running_server(env) as server:
            alone = statistics.median(
                send_webhook(server.url, job_event(str(90_000 + i))).seconds for i in range(5)
            )
            eventually(lambda: len(posts_per_job(slack)) == 5, timeout=120)
            started = time.monotonic()
            answers = concurrently(
                [lambda j=j: send_webhook(server.url, job_event(j)) for j in jobs], clients
            )
            eventually(lambda: len(posts_per_job(slack)) == count + 5, timeout=1200)
            took = time.monotonic() - started
            wait_idle(slack, quiet=2.0, timeout=120)
            handled = handled_ms(server.log(), "/webhooks/job-failed")[5:]
    seconds = [a.seconds for a in answers]
    counts = posts_per_job(slack)
    twice = sum(1 for job in jobs if counts[job] != 1)
    print(
        f"webhooks: {count} signed from {clients} clients: {sum(a.status == 202 for a in answers)}/{count} "
        f"accepted (202), p50 {percentile(seconds, 50) * 1000:.0f} ms, "
        f"p99 {percentile(seconds, 99) * 1000:.0f} ms "
        f"(one alone: {alone * 1000:.0f} ms); in the server p50 {percentile(handled, 50):.0f} ms, p99 "
        f"{percentile(handled, 99):.0f} ms; all posted {took:.1f} s after the first; jobs posted other "
        f"than once: {twice}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commands", type=int, default=50)
    parser.add_argument("--uploads", type=int, default=20)
    parser.add_argument("--upload-mb", type=float, default=30)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--webhooks", type=int, default=200)
    parser.add_argument("--webhook-clients", type=int, default=50)
    parser.add_argument(
        "--only", nargs="*", choices=["commands", "uploads", "crash", "webhooks"], default=None
    )
    args = parser.parse_args()
    chosen = args.only or ["commands", "uploads", "crash", "webhooks"]
    if "commands" in chosen:
        commands(args.commands)
    if "uploads" in chosen:
        uploads(args.uploads, args.upload_mb)
    if "crash" in chosen:
        crash(args.events)
    if "webhooks" in chosen:
        webhooks(args.webhooks, args.webhook_clients)


if __name__ == "__main__":
    main()
