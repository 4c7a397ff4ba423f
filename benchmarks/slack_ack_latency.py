"""Slack acknowledgement latency: how fast `ncclbot serve` answers an @mention carrying a log file, and
how long until the placeholder and the diagnosis appear, for small and large files.

    python benchmarks/slack_ack_latency.py [--sizes-mb 1,30,300] [--repeat 3]

Runs a real `ncclbot serve` against the tests' fake Slack (tests/fakes/slack_api.py) on loopback. For each
size, sends signed `app_mention` events with a file of that size (a 256-rank CUDA OOM padded with training
chatter) and measures: the HTTP acknowledgement (Slack wants it within 3 s), the first chat.postMessage (the
placeholder), and the incident message with the class id and culprit host. The baseline, in the same run,
is the acknowledgement of `/nccl help` (no work at all): ratios to it show what a log's size adds to the
acknowledgement (ideally nothing). It prints figures only; it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.slack_api import FakeSlack, eventually  # noqa: E402
from tests.scenario_tests import slack_requests as send  # noqa: E402
from tests.scenario_tests.conftest import server_env  # noqa: E402
from tests.scenario_tests.flows import incident_messages  # noqa: E402
from tests.scenario_tests.logs import next_culprit, oom_log, padded  # noqa: E402
from tests.server.helpers import running_server  # noqa: E402


def measure(slack: FakeSlack, url: str, channel: str, content: bytes) -> tuple[float, float, float]:
    """(ack, first post, incident message) in seconds after the event was sent."""
    shared = [slack.add_file("train.log", content)]
    asked = slack.post_user_message(channel, "<@UBOT>", files=shared)
    started = time.monotonic()
    reply = send.event(url, send.mention(channel, asked["ts"], shared))
    assert reply.status == 200, reply
    eventually(lambda: slack.thread(channel, asked["ts"]), timeout=600, interval=0.01)
    first = next(c.at for c in slack.calls_to("chat.postMessage") if c.params.get("channel") == channel)
    eventually(lambda: incident_messages(slack, channel), timeout=1800, interval=0.02)
    done = time.monotonic()
    return reply.seconds, first - started, done - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes-mb", default="1,30,300")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes_mb.split(",")]
    with (
        tempfile.TemporaryDirectory() as folder,
        FakeSlack() as slack,
        running_server(server_env(slack, Path(folder))) as server,
    ):
        baseline = []
        for i in range(max(5, args.repeat)):
            baseline.append(send.command(server.url, "help", channel=f"CBASE{i}").seconds)
        base = statistics.median(baseline)
        print(f"baseline: /nccl help acknowledged in {base * 1000:.1f} ms (median of {len(baseline)})")
        print(f"{'size':>8}  {'ack ms':>8}  {'ack/base':>8}  {'placeholder s':>13}  {'diagnosis s':>11}")
        for size in sizes:
            rows = []
            for run in range(args.repeat):
                rank, _host = next_culprit()
                content = padded(oom_log(rank), int(size * 1_000_000))
                rows.append(measure(slack, server.url, f"CBENCH{int(size)}X{run}", content))
            ack = statistics.median(r[0] for r in rows)
            first = statistics.median(r[1] for r in rows)
            done = statistics.median(r[2] for r in rows)
            figures = f"{ack * 1000:>8.1f}  {ack / base:>8.2f}  {first:>13.2f}  {done:>11.2f}"
            print(f"{size:>6.0f}MB  {figures}")


if __name__ == "__main__":
    main()
