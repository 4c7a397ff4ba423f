"""One APScheduler 3.x cron job per digest channel, plus a catch-up at start.

- Day names, never numbers, in the cron trigger: APScheduler 3.x counts `day_of_week` from 0 = Monday,
  crontab from 0 = Sunday; the settings only accept names.
- `misfire_grace_time` (the digest grace, hours) and `coalesce` come through `job_defaults`: passed to
  the scheduler's constructor directly they would be ignored. A run delayed by a busy or suspended
  process still goes out within the grace; a backlog collapses to one run.
- Jobs live in memory: APScheduler 3 cannot share a job store between processes. What must survive a
  restart, and be shared by replicas, is which weeks were posted: the store's claim per (channel,
  week). So every replica schedules every channel, each run claims before posting, and one posts.
- A bot that was down at its slot posts on start when the slot is within the grace and the week is
  still missing (`post_if_due` checks both).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

from bot.services.digest import LEASE, post_if_due
from bot.services.outlet import Outlet
from bot.settings import DigestTarget, Settings, WeeklySlot

log = logging.getLogger("ncclbot.digest")

Clock = Callable[[], datetime]
RETRY_SLACK = timedelta(seconds=5)
# After a failed post (Slack down, database away) the week's claim is given back; try again this soon,
# as long as the slot is within the grace.
RETRY_AFTER_FAILURE = timedelta(minutes=5)
STOP_TIMEOUT_S = 30


def cron_trigger(slot: WeeklySlot) -> CronTrigger:
    return CronTrigger(
        day_of_week=slot.day_name, hour=slot.hour, minute=slot.minute, second=slot.second, timezone=slot.zone
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


class DigestScheduler:
    """A background service (`start`/`stop`) posting each channel's weekly digest."""

    name = "digest-scheduler"

    def __init__(
        self,
        settings: Settings,
        outlet: Outlet,
        *,
        clock: Clock = _utc_now,
        lease: timedelta = LEASE,
        retry_after_failure: timedelta = RETRY_AFTER_FAILURE,
        store: Any | None = None,
    ) -> None:
        self._settings = settings
        self._outlet = outlet
        self._clock = clock
        self._lease = lease
        self._retry_after_failure = retry_after_failure
        self._store = store
        self._owns_store = store is None
        self.targets = settings.digest_targets()
        self.grace = timedelta(hours=settings.digest_grace_hours)
        self.claimant = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._scheduler: BackgroundScheduler | None = None
        self._catching_up: threading.Thread | None = None
        self._lock = threading.Lock()
        # Set once the start-up catch-up has looked at every channel (tests and readiness wait on it).
        self.caught_up = threading.Event()

    def start(self) -> None:
        if self._store is None:
            from bot.store import Store

            self._store = Store.open(self._settings.database_url)
        scheduler = BackgroundScheduler(
            timezone=UTC,
            job_defaults={
                "misfire_grace_time": int(self.grace.total_seconds()),
                "coalesce": True,
                "max_instances": 1,
            },
        )
        scheduler.add_listener(self._on_event, EVENT_JOB_MISSED | EVENT_JOB_ERROR)
        for target in self.targets:
            scheduler.add_job(
                self.run,
                cron_trigger(target.slot),
                args=[target],
                id=f"digest:{target.channel}",
                name=f"weekly digest to {target.channel} ({target.slot})",
                replace_existing=True,
            )
        scheduler.start()
        self._scheduler = scheduler
        # A thread of its own rather than a one-off job: APScheduler removes a finished one-off job from
        # its scheduler thread, which races with a shutdown that follows quickly (a short-lived test,
        # a bot stopped right after starting).
        self._catching_up = threading.Thread(target=self.catch_up, name="digest-catch-up", daemon=True)
        self._catching_up.start()
        log.info("digest scheduled: %s", "; ".join(f"{t.channel} {t.slot}" for t in self.targets))

    def stop(self) -> None:
        if self._catching_up is not None:
            self._catching_up.join(timeout=STOP_TIMEOUT_S)
            self._catching_up = None
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
        if self._owns_store and self._store is not None:
            self._store.close()
            self._store = None

    def next_run(self, channel: str) -> datetime | None:
        """When the cron job of `channel` fires next (for tests and the log)."""
        job = self._scheduler.get_job(f"digest:{channel}") if self._scheduler else None
        return None if job is None else job.next_run_time

    def catch_up(self) -> None:
        """At start: post every channel whose latest slot passed while this bot was down (`run` never
        raises: a failed channel is retried later and does not keep the others back)."""
        try:
            for target in self.targets:
                self.run(target)
        finally:
            self.caught_up.set()

    def run(self, target: DigestTarget) -> None:
        """Post the channel's digest if its slot is due and its week still missing."""
        try:
            result = post_if_due(
                self._store,
                self._outlet,
                target,
                now=self._clock(),
                grace=self.grace,
                stale_days=self._settings.digest_stale_days,
                claimant=self.claimant,
                lease=self._lease,
            )
        except Exception as error:
            log.error("posting the digest to %s failed (%s); trying again later", target.channel, error)
            self._schedule_retry(target, self._retry_after_failure)
            return
        if result is not None and result.outcome == "in-progress":
            # Another replica holds the claim. Look again once its lease is over: if it died before
            # posting, this replica takes the week over; if it posted, the retry finds it done.
            self._schedule_retry(target, self._lease + RETRY_SLACK)

    def _schedule_retry(self, target: DigestTarget, delay: timedelta) -> None:
        with self._lock:
            if self._scheduler is None:
                return
            self._scheduler.add_job(
                self.run,
                "date",
                run_date=_utc_now() + delay,
                args=[target],
                id=f"digest-retry:{target.channel}",
                replace_existing=True,
            )

    def _on_event(self, event: JobExecutionEvent) -> None:
        if event.code == EVENT_JOB_MISSED:
            log.warning(
                "digest job %s missed its run at %s (past the grace)", event.job_id, event.scheduled_run_time
            )
        elif event.exception is not None:
            log.error("digest job %s failed: %s", event.job_id, event.exception)
