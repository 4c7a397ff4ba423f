"""Calendar arithmetic of the weekly digest: which ISO week a moment falls in (in the channel's time
zone) and when the latest scheduled slot was. Python's `weekday()` (0 = Monday) is used throughout;
day names are the only form the settings accept."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from bot.settings import WeeklySlot


def iso_week(moment: datetime, timezone: str = "UTC") -> str:
    """`2026-W49`: the ISO year and week of `moment` on the wall clock of `timezone`."""
    from zoneinfo import ZoneInfo

    year, week, _ = moment.astimezone(ZoneInfo(timezone)).isocalendar()
    return f"{year}-W{week:02d}"


def latest_slot(slot: WeeklySlot, now: datetime) -> datetime:
    """The most recent scheduled moment at or before `now` (UTC). Computed on the local calendar, so a
    daylight-saving change keeps the wall-clock time (09:00 stays 09:00)."""
    zone = slot.zone
    local = now.astimezone(zone)
    at = time(slot.hour, slot.minute, slot.second)
    for back in (0, 7, 14):
        day = local.date() - timedelta(days=(local.weekday() - slot.day) % 7 + back)
        candidate = datetime.combine(day, at, tzinfo=zone)
        if candidate <= now:
            return candidate.astimezone(UTC)
    raise AssertionError("a weekly slot is always within the last two weeks")  # pragma: no cover
