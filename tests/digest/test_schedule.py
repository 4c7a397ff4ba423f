"""Day-name schedules, ISO weeks and slots in a time zone, and the APScheduler trigger built from them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.digest.scheduler import cron_trigger
from bot.services.digest import iso_week, latest_slot
from bot.settings import SettingsError, load_settings, parse_schedule


@pytest.mark.parametrize("schedule", ["1 09:00", "0 9 * * 1", "monday 09:00", "mon 9", "mon 24:00", "mon"])
def test_a_schedule_is_a_day_name_and_a_time(schedule: str) -> None:
    with pytest.raises(SettingsError, match="NCCLBOT_DIGEST_SCHEDULE"):
        load_settings(digest_schedule=schedule)


def test_channels_from_the_environment_with_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCLBOT_DIGEST_CHANNELS", "C0AAA, C0BBB")
    monkeypatch.setenv("NCCLBOT_DIGEST_SCHEDULE", "fri 16:30")
    monkeypatch.setenv("NCCLBOT_DIGEST_TIMEZONE", "Europe/Berlin")
    targets = load_settings().digest_targets()
    assert [(t.channel, str(t.slot)) for t in targets] == [
        ("C0AAA", "fri 16:30 Europe/Berlin"),
        ("C0BBB", "fri 16:30 Europe/Berlin"),
    ]


def test_a_channel_may_have_its_own_schedule_and_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "NCCLBOT_DIGEST_CHANNELS",
        '[{"channel": "C0TOKYO", "schedule": "tue 08:30", "timezone": "Asia/Tokyo"}, "C0UTC"]',
    )
    targets = load_settings().digest_targets()
    assert [(t.channel, str(t.slot)) for t in targets] == [
        ("C0TOKYO", "tue 08:30 Asia/Tokyo"),
        ("C0UTC", "mon 09:00 UTC"),
    ]


def test_without_digest_channels_the_default_channel_gets_it() -> None:
    assert [t.channel for t in load_settings(default_channel="C0DEF").digest_targets()] == ["C0DEF"]
    assert load_settings().digest_targets() == []


def test_an_unknown_time_zone_is_refused() -> None:
    with pytest.raises(SettingsError, match="unknown time zone 'Mars/Olympus'"):
        load_settings(digest_timezone="Mars/Olympus")


def test_iso_week_is_taken_on_the_channels_wall_clock() -> None:
    sunday_night_utc = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)
    assert iso_week(sunday_night_utc) == "2026-W48"
    assert iso_week(sunday_night_utc, "Europe/Berlin") == "2026-W49"  # already Monday there
    assert iso_week(datetime(2027, 1, 1, tzinfo=UTC)) == "2026-W53"


def test_latest_slot_is_the_last_scheduled_moment_up_to_now() -> None:
    slot = parse_schedule("mon 09:00", "Europe/Berlin")
    monday_just_before = datetime(2026, 11, 30, 7, 59, tzinfo=UTC)  # 08:59 in Berlin
    assert latest_slot(slot, monday_just_before) == datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
    assert latest_slot(slot, datetime(2026, 11, 30, 8, 0, tzinfo=UTC)) == datetime(
        2026, 11, 30, 8, 0, tzinfo=UTC
    )
    # Across the spring change (29 March 2026) the slot stays at 09:00 on the wall clock.
    assert latest_slot(slot, datetime(2026, 3, 30, 12, 0, tzinfo=UTC)) == datetime(
        2026, 3, 30, 7, 0, tzinfo=UTC
    )


def test_the_cron_trigger_fires_on_the_named_day_in_the_zone() -> None:
    # APScheduler 3 reads day_of_week=1 as Tuesday; the trigger is built from the name.
    trigger = cron_trigger(parse_schedule("mon 09:00", "America/New_York"))
    after = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # a Tuesday
    fire = trigger.get_next_fire_time(None, after)
    assert fire is not None
    assert (fire.weekday(), fire.hour, fire.minute) == (0, 9, 0)
    assert fire.astimezone(UTC) == datetime(2026, 12, 7, 14, 0, tzinfo=UTC)


def test_channels_from_the_settings_file_as_the_readme_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "ncclbot.toml"
    config.write_text(
        'digest_schedule = "mon 09:00"\n'
        'digest_timezone = "Europe/Berlin"\n'
        "digest_channels = [\n"
        '  "C0123ABCD",\n'
        '  { channel = "C0456EFGH", schedule = "tue 08:30", timezone = "Asia/Tokyo" },\n'
        "]\n"
    )
    monkeypatch.setenv("NCCLBOT_CONFIG", str(config))
    assert [(t.channel, str(t.slot)) for t in load_settings().digest_targets()] == [
        ("C0123ABCD", "mon 09:00 Europe/Berlin"),
        ("C0456EFGH", "tue 08:30 Asia/Tokyo"),
    ]
