"""Load against a running `ncclbot serve`, shared by the CI tests (small counts) and
benchmarks/server_load.py (the figures): many signed requests from concurrent clients, many uploads at
once, and the server's memory read from /proc while they run."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tests.fakes.slack_api import FakeSlack, blocks_text, eventually
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.logs import next_culprit, oom_log, padded

T = TypeVar("T")
# Slack's limit for acknowledging a slash command, a button or an event.
SLACK_ACK_S = 3.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def concurrently(calls: Sequence[Callable[[], T]], clients: int) -> list[T]:
    """Run `calls` from `clients` threads (the first wave released together, each client then takes
    the next call as soon as it is done); results in call order."""
    wave = min(clients, len(calls))
    start = threading.Barrier(wave)

    def released(index: int) -> T:
        if index < wave:
            start.wait(timeout=60)
        return calls[index]()

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(released, range(len(calls))))


@dataclass(frozen=True)
class Memory:
    rss: int  # bytes now
    peak: int  # bytes, the most the process ever held (VmHWM)


def _status(pid: int) -> dict[str, int]:
    fields = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # it ended meanwhile
        return {"VmRSS": 0, "VmHWM": 0}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return {"VmRSS": fields.get("VmRSS", 0), "VmHWM": fields.get("VmHWM", 0)}


def family(pid: int) -> list[int]:
    """`pid` and every process below it (the matcher's scan workers and their fork server)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def memory(pid: int) -> Memory:
    """RSS of the server with its worker processes (summed; shared pages count once per process, so this
    is an upper bound), and the server's own peak."""
    return Memory(rss=sum(_status(p)["VmRSS"] for p in family(pid)), peak=_status(pid)["VmHWM"])


class PeakSampler:
    """Samples the RSS of a process and its workers every `interval` s in a thread; `peak` is the highest
    seen since start (VmHWM cannot be reset without privileges, so a phase's own peak is sampled)."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid, self.interval = pid, interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, memory(self.pid).rss)
            self._stop.wait(self.interval)


@dataclass(frozen=True)
class CommandFigures:
    statuses: list[int]
    seconds: list[float]

    @property
    def p50(self) -> float:
        return percentile(self.seconds, 50)

    @property
    def p99(self) -> float:
        return percentile(self.seconds, 99)


def slash_commands(
    url: str, count: int, clients: int, *, texts: Sequence[str] = ("status", "help")
) -> CommandFigures:
    """`count` signed `/nccl` commands (cycling through `texts`) from `clients` concurrent clients."""
    calls = [
        (lambda i=i: send.command(url, texts[i % len(texts)], channel=f"CLOAD{i % 7}", user=f"ULOAD{i}"))
        for i in range(count)
    ]
    replies = concurrently(calls, clients)
    return CommandFigures(statuses=[r.status for r in replies], seconds=[r.seconds for r in replies])


@dataclass(frozen=True)
class UploadFigures:
    acks: list[float]  # seconds to the HTTP acknowledgement of each mention
    placeholders: list[str]  # the first text each asker saw in its thread
    answered_s: float  # from the first mention until every asker had the answer
    peak_rss: int  # the server's highest RSS while they ran
    channels: list[str]


def answered(slack: FakeSlack, channel: str, asked: dict[str, Any]) -> bool:
    """The asker's placeholder has become the answer (a result line, or a one-line problem)."""
    replies = slack.thread(channel, asked["ts"])
    shown = blocks_text(replies[0].get("blocks") or []) if replies else ""
    return bool(shown) and not shown.startswith(":hourglass")


def uploads_at_once(
    slack: FakeSlack, url: str, pid: int, *, count: int, size: int, prefix: str, timeout: float = 600
) -> UploadFigures:
    """`count` @mentions, each with its own `size`-byte log (a CUDA OOM padded with training chatter),
    sent at once; waits until all are diagnosed, sampling the server's RSS meanwhile."""
    channels, sent = [], []
    for index in range(count):
        rank, _host = next_culprit()
        shared = [slack.add_file("train.log", padded(oom_log(rank), size))]
        channel = f"{prefix}{index:03d}"
        asked = slack.post_user_message(channel, "<@UBOT> job died", files=shared)
        channels.append(channel)
        sent.append((channel, asked, shared))
    calls = [(lambda c=c, a=a, s=s: send.event(url, send.mention(c, a["ts"], s))) for c, a, s in sent]
    with PeakSampler(pid) as sampler:
        started = time.monotonic()
        replies = concurrently(calls, count)
        for channel, asked, _shared in sent:
            eventually(lambda c=channel, a=asked: answered(slack, c, a), timeout=timeout, interval=0.05)
        took = time.monotonic() - started
    first_texts = []
    for channel, asked, _shared in sent:
        posts = [
            c.params.get("text", "")
            for c in slack.calls_to("chat.postMessage")
            if c.params.get("channel") == channel and c.params.get("thread_ts") == asked["ts"]
        ]
        first_texts.append(posts[0] if posts else "")
    return UploadFigures(
        acks=[r.seconds for r in replies if r.status == 200],
        placeholders=first_texts,
        answered_s=took,
        peak_rss=sampler.peak,
        channels=channels,
    )
