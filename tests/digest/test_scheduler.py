"""The digest scheduler (APScheduler 3.11): a real cron job per channel and a catch-up at start, with
an injected clock where the test needs a particular moment. Replicas share one database: SQLite file
or PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.digest.scheduler import DigestScheduler
from bot.services.outlet import InMemoryOutlet, Message, MessageRef
from bot.settings import DAY_NAMES, DigestChannel, Settings
from bot.store import Store

CHANNEL = "C0DIGEST"
SLOT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # Monday 09:00 UTC, ISO week 2026-W49
WAIT_S = 20


def settings(database_url: str, schedule: str = "mon 09:00", grace_hours: float = 24) -> Settings:
    return Settings(
        database_url=database_url,
        digest_channels=[DigestChannel(channel=CHANNEL, schedule=schedule, timezone="UTC")],
        digest_grace_hours=grace_hours,
    )


@contextmanager
def running(scheduler: DigestScheduler) -> Iterator[DigestScheduler]:
    scheduler.start()
    try:
        yield scheduler
    finally:
        scheduler.stop()


def at(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


def wait_until(condition: Callable[[], bool], seconds: float = WAIT_S) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_bot_down_at_its_slot_posts_on_start_once(database_url: str) -> None:
    first, second = InMemoryOutlet(), InMemoryOutlet()
    with running(DigestScheduler(settings(database_url), first, clock=at(SLOT + timedelta(hours=2)))) as bot:
        assert bot.caught_up.wait(WAIT_S)
    [posted] = first.top_level(CHANNEL)
    assert posted.key == f"digest:{CHANNEL}:2026-W49"
    # Restarted an hour later, the week is done.
    with running(DigestScheduler(settings(database_url), second, clock=at(SLOT + timedelta(hours=3)))) as bot:
        assert bot.caught_up.wait(WAIT_S)
    assert second.posted == []
    with Store.open(database_url) as store:
        claim = store.digest_claim(CHANNEL, "2026-W49")
    assert claim is not None and claim.slack_ts == posted.ref.ts


def test_past_the_grace_a_missed_week_is_skipped_not_posted_stale(database_url: str) -> None:
    outlet = InMemoryOutlet()
    late = SLOT + timedelta(hours=30)
    with running(DigestScheduler(settings(database_url), outlet, clock=at(late))) as bot:
        assert bot.caught_up.wait(WAIT_S)
    assert outlet.posted == []


def test_two_scheduler_instances_catching_up_post_one_digest(database_url: str) -> None:
    outlets = [InMemoryOutlet(), InMemoryOutlet()]
    clock = at(SLOT + timedelta(minutes=1))
    replicas = [DigestScheduler(settings(database_url), outlet, clock=clock) for outlet in outlets]
    for replica in replicas:
        replica.start()
    try:
        assert all(replica.caught_up.wait(WAIT_S) for replica in replicas)
    finally:
        for replica in replicas:
            replica.stop()
    assert sum(len(outlet.posted) for outlet in outlets) == 1


def test_the_cron_job_fires_at_its_slot_in_two_replicas_and_posts_once(database_url: str) -> None:
    """Real time: the slot is a few seconds ahead, on today's day name."""
    slot = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=0)
    schedule = f"{DAY_NAMES[slot.weekday()]} {slot:%H:%M:%S}"
    outlets = [InMemoryOutlet(), InMemoryOutlet()]
    replicas = [DigestScheduler(settings(database_url, schedule), outlet) for outlet in outlets]
    for replica in replicas:
        replica.start()
    try:
        assert replicas[0].next_run(CHANNEL) == slot
        assert all(replica.caught_up.wait(WAIT_S) for replica in replicas)
        assert sum(len(o.posted) for o in outlets) == 0  # last week's slot is past the grace
        assert wait_until(lambda: sum(len(o.posted) for o in outlets) >= 1)
        time.sleep(1.0)  # the other replica's run has had time to happen too
    finally:
        for replica in replicas:
            replica.stop()
    assert sum(len(o.posted) for o in outlets) == 1
    [posted] = [p for o in outlets for p in o.posted]
    year, week, _ = slot.isocalendar()
    assert posted.key == f"digest:{CHANNEL}:{year}-W{week:02d}"


class DownOnce(InMemoryOutlet):
    """Slack answering the first post with an error."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0

    def post(self, channel: str, message: Message, **kwargs: Any) -> MessageRef:
        if self.failures == 0:
            self.failures += 1
            raise ConnectionError("slack is down")
        return super().post(channel, message, **kwargs)


def test_a_failed_post_is_retried_within_the_grace(database_url: str) -> None:
    outlet = DownOnce()
    clock = at(SLOT + timedelta(minutes=1))
    bot = DigestScheduler(
        settings(database_url), outlet, clock=clock, retry_after_failure=timedelta(seconds=0.5)
    )
    with running(bot):
        assert bot.caught_up.wait(WAIT_S)
        assert wait_until(lambda: len(outlet.posted) == 1)
    assert outlet.failures == 1
