"""One typed settings object for the server and every front end: environment variables, optionally a
TOML file (`NCCLBOT_CONFIG=/etc/ncclbot.toml`, keys named like the fields), validated once at start.

Environment names follow DESIGN.md: Slack's own variables keep their usual names (`SLACK_BOT_TOKEN`...),
everything else is `NCCLBOT_<FIELD>`. The environment wins over the file. Secrets are `SecretStr`, so a
settings object printed or logged never shows them.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

CONFIG_FILE_ENV = "NCCLBOT_CONFIG"
GIB = 1024**3


def _env(field: str, *extra: str) -> Any:
    """Accept `NCCLBOT_FIELD` in the environment, `field` in the TOML file, and `extra` names."""
    return AliasChoices(field, f"NCCLBOT_{field.upper()}", *extra)


class SettingsError(ValueError):
    """Invalid settings: one line per problem, ready to print."""


# Weekday names only: APScheduler 3.x reads a numeric day_of_week as 0 = Monday while crontab reads
# 1 = Monday, so a number here would silently post on the wrong day.
DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_SCHEDULE = re.compile(r"(?P<day>[a-z]{3})\s+(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?")


@dataclass(frozen=True, slots=True)
class WeeklySlot:
    """When a channel's digest is due: a weekday (`day` 0 = Monday, as Python's `weekday()`), a wall-clock
    time and the time zone that wall clock is in."""

    day: int
    hour: int
    minute: int
    second: int
    timezone: str

    @property
    def day_name(self) -> str:
        return DAY_NAMES[self.day]

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def __str__(self) -> str:
        seconds = f":{self.second:02d}" if self.second else ""
        return f"{self.day_name} {self.hour:02d}:{self.minute:02d}{seconds} {self.timezone}"


def parse_schedule(text: str, timezone: str) -> WeeklySlot:
    """`mon 09:00` (optionally `mon 09:00:30`) in `timezone`; raises ValueError with the reason."""
    match = _SCHEDULE.fullmatch(text.strip().lower())
    if match is None or match["day"] not in DAY_NAMES:
        raise ValueError(
            f"schedule {text!r} is not a day name and a time such as 'mon 09:00' "
            f"(days: {', '.join(DAY_NAMES)}; numbers are refused, cron tools disagree on what 1 means)"
        )
    hour, minute, second = int(match["hour"]), int(match["minute"]), int(match["second"] or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"schedule {text!r} has no such time of day")
    return WeeklySlot(DAY_NAMES.index(match["day"]), hour, minute, second, _zone_name(timezone))


def _zone_name(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {name!r} (an IANA name such as 'Europe/Berlin' or 'UTC')"
        ) from None
    return name


class DigestChannel(BaseModel):
    """One channel that gets the weekly digest; `schedule` and `timezone` default to the settings'
    `digest_schedule` and `digest_timezone`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str = Field(min_length=1)
    schedule: str | None = None
    timezone: str | None = None

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        if value is not None:
            parse_schedule(value, "UTC")
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        return None if value is None else _zone_name(value)


@dataclass(frozen=True, slots=True)
class DigestTarget:
    channel: str
    slot: WeeklySlot


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", populate_by_name=True, case_sensitive=False)

    # Slack (DESIGN.md names)
    slack_bot_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("slack_bot_token", "SLACK_BOT_TOKEN")
    )
    slack_signing_secret: SecretStr | None = Field(
        None, validation_alias=AliasChoices("slack_signing_secret", "SLACK_SIGNING_SECRET")
    )
    slack_app_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("slack_app_token", "SLACK_APP_TOKEN")
    )
    slack_api_url: str = Field(
        "https://slack.com/api/", validation_alias=AliasChoices("slack_api_url", "SLACK_API_URL")
    )
    default_channel: str | None = Field(None, validation_alias=_env("default_channel"))
    # Who may press Probe / Drain / Resolve / Requeue: Slack user ids and user-group ids.
    admin_users: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=_env("admin_users")
    )
    admin_groups: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=_env("admin_groups")
    )

    # Storage and inputs
    database_url: str | None = Field(None, validation_alias=_env("database_url"))
    max_upload_bytes: int = Field(GIB, gt=0, validation_alias=_env("max_upload_bytes"))
    spool_dir: Path | None = Field(None, validation_alias=_env("spool_dir"))
    diagnosis_concurrency: int = Field(2, ge=1, le=64, validation_alias=_env("diagnosis_concurrency"))
    # How long a worker's claim on a queued task lasts without a heartbeat: after a crash, the task is
    # taken over by another worker (or this one, restarted) once it runs out.
    work_lease_s: float = Field(600.0, ge=1, validation_alias=_env("work_lease_s"))
    # Log files kept with incidents (re-diagnosis with files added later, feedback export), in all.
    bundle_keep_bytes: int = Field(10 * GIB, ge=0, validation_alias=_env("bundle_keep_bytes"))

    # Slack replies
    # Seconds between two progress edits of one placeholder (chat.update is rate-limited per channel).
    slack_progress_interval_s: float = Field(3.0, ge=0.5, validation_alias=_env("slack_progress_interval_s"))
    snooze_hours: float = Field(24.0, gt=0, validation_alias=_env("snooze_hours"))

    # The "Run probe" button and `/nccl probe <node>`: launcher and options (see `ncclbot probe --help`).
    probe_via: Literal["local", "ssh", "slurm", "k8s"] = Field("ssh", validation_alias=_env("probe_via"))
    probe_timeout_s: float = Field(600.0, gt=0, validation_alias=_env("probe_timeout_s"))
    probe_max_bytes: int | None = Field(None, gt=0, validation_alias=_env("probe_max_bytes"))
    probe_iters: int = Field(5, ge=1, validation_alias=_env("probe_iters"))
    probe_nproc: int | None = Field(None, ge=1, validation_alias=_env("probe_nproc"))
    probe_ssh_user: str | None = Field(None, validation_alias=_env("probe_ssh_user"))
    probe_ssh_port: int = Field(22, ge=1, le=65535, validation_alias=_env("probe_ssh_port"))
    probe_ssh_key: str | None = Field(None, validation_alias=_env("probe_ssh_key"))
    probe_ssh_known_hosts: str | None = Field(None, validation_alias=_env("probe_ssh_known_hosts"))
    probe_slurm_partition: str | None = Field(None, validation_alias=_env("probe_slurm_partition"))
    probe_k8s_namespace: str = Field("default", validation_alias=_env("probe_k8s_namespace"))
    probe_k8s_image: str = Field("ncclbot-probe:latest", validation_alias=_env("probe_k8s_image"))

    # Webhook
    webhook_secret: SecretStr | None = Field(None, validation_alias=_env("webhook_secret"))

    # Weekly digest. Channels: a comma list of ids in the environment (`C0123,C0456`), or JSON / TOML
    # tables with their own schedule:
    #   [{"channel": "C0123", "schedule": "tue 08:30", "timezone": "Asia/Tokyo"}]
    # Without any, the digest goes to `default_channel`.
    digest_channels: Annotated[list[DigestChannel], NoDecode] = Field(
        default_factory=list, validation_alias=_env("digest_channels")
    )
    digest_schedule: str = Field("mon 09:00", validation_alias=_env("digest_schedule"))
    digest_timezone: str = Field("UTC", validation_alias=_env("digest_timezone"))
    # How late a digest may still go out: APScheduler's misfire grace time, and how far back a bot that
    # was down at the slot looks when it starts. Past it, that week's digest is skipped, not posted stale.
    digest_grace_hours: float = Field(24.0, gt=0, le=24 * 6, validation_alias=_env("digest_grace_hours"))
    # "Open incidents older than N days" in the digest.
    digest_stale_days: int = Field(7, ge=1, le=365, validation_alias=_env("digest_stale_days"))

    # HTTP server (`ncclbot serve`)
    host: str = Field("127.0.0.1", validation_alias=_env("host"))
    port: int = Field(3000, ge=1, le=65535, validation_alias=_env("port"))

    @field_validator("admin_users", "admin_groups", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("digest_channels", mode="before")
    @classmethod
    def _channels(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                value = json.loads(text)
            else:
                value = [item.strip() for item in text.split(",") if item.strip()]
        if isinstance(value, list):
            return [{"channel": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("digest_schedule")
    @classmethod
    def _digest_schedule(cls, value: str) -> str:
        parse_schedule(value, "UTC")
        return value

    @field_validator("digest_timezone")
    @classmethod
    def _digest_timezone(cls, value: str) -> str:
        return _zone_name(value)

    @field_validator("slack_api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL, not {value!r}")
        return value if value.endswith("/") else value + "/"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(CONFIG_FILE_ENV)
        if config_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config_file)))
        return tuple(sources)

    @property
    def slack_enabled(self) -> bool:
        return self.slack_bot_token is not None and self.slack_signing_secret is not None

    def digest_targets(self) -> list[DigestTarget]:
        """The channels that get the weekly digest, each with its slot (validated above)."""
        channels = self.digest_channels or (
            [DigestChannel(channel=self.default_channel)] if self.default_channel else []
        )
        return [
            DigestTarget(
                channel=c.channel,
                slot=parse_schedule(c.schedule or self.digest_schedule, c.timezone or self.digest_timezone),
            )
            for c in channels
        ]


def load_settings(**overrides: Any) -> Settings:
    """Read and validate the settings; raise SettingsError with one line per problem."""
    config_file = os.environ.get(CONFIG_FILE_ENV)
    if config_file and not Path(config_file).is_file():
        raise SettingsError(f"{CONFIG_FILE_ENV}={config_file}: no such file")
    try:
        return Settings(**overrides)
    except ValidationError as error:
        lines = []
        for problem in error.errors():
            where = ".".join(str(part) for part in problem["loc"]) or "settings"
            lines.append(f"{where}: {problem['msg']}")
        raise SettingsError("\n".join(lines)) from None
