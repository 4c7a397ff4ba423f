"""One typed settings object for the server and every front end: environment variables, optionally a
TOML file (`NCCLBOT_CONFIG=/etc/ncclbot.toml`, keys named like the fields), validated once at start.

Environment names follow DESIGN.md: Slack's own variables keep their usual names (`SLACK_BOT_TOKEN`...),
everything else is `NCCLBOT_<FIELD>`. The environment wins over the file. Secrets are `SecretStr`, so a
settings object printed or logged never shows them. Every field has a `description`: the README's
configuration reference is made from them (`ncclbot config reference`; a test compares the two).

`load_settings()` reports every problem at once, one line each, naming what to change: the environment
variable, or the file and key. An `NCCLBOT_*` variable or a file key that nothing reads is a problem too
(a typo would otherwise leave the default silently in force).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
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
MIB = 1024**2


def _env(field: str, *extra: str) -> Any:
    """Accept `NCCLBOT_FIELD` in the environment, `field` in the TOML file, and `extra` names."""
    return AliasChoices(field, f"NCCLBOT_{field.upper()}", *extra)


class SettingsError(ValueError):
    """Invalid settings: one line per problem, ready to print, each naming what to fix."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


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
        None,
        validation_alias=AliasChoices("slack_bot_token", "SLACK_BOT_TOKEN"),
        description="Slack bot token (`xoxb-...`); without it nothing is posted to Slack",
    )
    slack_signing_secret: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("slack_signing_secret", "SLACK_SIGNING_SECRET"),
        description="Slack signing secret: verifies requests to `/slack/events`",
    )
    slack_app_token: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("slack_app_token", "SLACK_APP_TOKEN"),
        description="Slack app-level token (`xapp-...`): connect in Socket Mode, no public URL needed",
    )
    slack_api_url: str = Field(
        "https://slack.com/api/",
        validation_alias=AliasChoices("slack_api_url", "SLACK_API_URL"),
        description="Slack Web API base URL (tests point it at a local fake)",
    )
    default_channel: str | None = Field(
        None,
        validation_alias=_env("default_channel"),
        description="Slack channel id for webhook posts that name no channel",
    )
    outlet_file: Path | None = Field(
        None,
        validation_alias=_env("outlet_file"),
        description="without `SLACK_BOT_TOKEN`: append messages as JSON lines to this file (no lookup by"
        " key: a crash between posting and recording may repeat one message); unset: kept in memory",
    )
    admin_users: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias=_env("admin_users"),
        description="Slack user ids who may press Probe / Drain / Resolve / Requeue (comma-separated)",
    )
    admin_groups: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias=_env("admin_groups"),
        description="Slack user-group ids whose members may press those buttons (comma-separated)",
    )

    # Storage and inputs
    database_url: str | None = Field(
        None,
        validation_alias=_env("database_url"),
        description="incident store: `sqlite:///PATH` or `postgresql://USER:PASSWORD@HOST/DB`;"
        " unset: a SQLite file in the user data directory",
    )
    max_upload_bytes: int = Field(
        GIB,
        gt=0,
        validation_alias=_env("max_upload_bytes"),
        description="largest log upload or request body accepted, in bytes",
    )
    spool_dir: Path | None = Field(
        None,
        validation_alias=_env("spool_dir"),
        description="directory where uploaded logs wait for their diagnosis",
    )
    diagnosis_concurrency: int = Field(
        2,
        ge=1,
        le=64,
        validation_alias=_env("diagnosis_concurrency"),
        description="diagnoses run at the same time by one server",
    )
    work_lease_s: float = Field(
        600.0,
        ge=1,
        validation_alias=_env("work_lease_s"),
        description="seconds a worker's claim on a queued task lasts without a heartbeat; after a crash the"
        " task is taken over once it runs out",
    )
    bundle_keep_bytes: int = Field(
        10 * GIB,
        ge=0,
        validation_alias=_env("bundle_keep_bytes"),
        description="log files kept with incidents (re-diagnosis with files added later, feedback export),"
        " in bytes in all",
    )

    # Slack replies
    slack_progress_interval_s: float = Field(
        3.0,
        ge=0.5,
        validation_alias=_env("slack_progress_interval_s"),
        description="seconds between two progress edits of one placeholder (chat.update is rate-limited)",
    )
    snooze_hours: float = Field(
        24.0, gt=0, validation_alias=_env("snooze_hours"), description="how long the Snooze button snoozes"
    )

    # The "Run probe" button and `/nccl probe <node>`: launcher and options (see `ncclbot probe --help`).
    probe_via: Literal["local", "ssh", "slurm", "k8s"] = Field(
        "ssh", validation_alias=_env("probe_via"), description="launcher of probes started from Slack"
    )
    probe_timeout_s: float = Field(
        600.0,
        gt=0,
        validation_alias=_env("probe_timeout_s"),
        description="longest a probe may run, in seconds",
    )
    probe_max_bytes: int | None = Field(
        None,
        gt=0,
        validation_alias=_env("probe_max_bytes"),
        description="largest allreduce size of the sweep (unset: 1 GiB with NCCL, 16 MiB with Gloo)",
    )
    probe_iters: int = Field(5, ge=1, validation_alias=_env("probe_iters"), description="iterations per size")
    probe_nproc: int | None = Field(
        None, ge=1, validation_alias=_env("probe_nproc"), description="ranks per node (unset: one per GPU)"
    )
    probe_ssh_user: str | None = Field(
        None, validation_alias=_env("probe_ssh_user"), description="ssh launcher: user on the nodes"
    )
    probe_ssh_port: int = Field(
        22, ge=1, le=65535, validation_alias=_env("probe_ssh_port"), description="ssh launcher: port"
    )
    probe_ssh_key: str | None = Field(
        None, validation_alias=_env("probe_ssh_key"), description="ssh launcher: private key file"
    )
    probe_ssh_known_hosts: str | None = Field(
        None,
        validation_alias=_env("probe_ssh_known_hosts"),
        description="ssh launcher: known_hosts file the nodes' host keys are checked against",
    )
    probe_slurm_partition: str | None = Field(
        None, validation_alias=_env("probe_slurm_partition"), description="slurm launcher: partition"
    )
    probe_k8s_namespace: str = Field(
        "default",
        validation_alias=_env("probe_k8s_namespace"),
        description="k8s launcher: namespace of the probe Jobs (deploy/kubernetes allows the bot's own)",
    )
    probe_k8s_image: str = Field(
        "ncclbot-probe:latest",
        validation_alias=_env("probe_k8s_image"),
        description="k8s launcher: image with torch and ncclbot that the probe Job runs",
    )

    # Webhook (bot.webhook)
    webhook_secret: SecretStr | None = Field(
        None,
        validation_alias=_env("webhook_secret"),
        description="shared secret of the HMAC-SHA256 signature on `POST /webhooks/job-failed`",
    )
    webhook_bearer_token: SecretStr | None = Field(
        None,
        validation_alias=_env("webhook_bearer_token"),
        description="bearer token accepted on the webhook from senders that cannot sign (Alertmanager)",
    )
    webhook_max_bytes: int = Field(
        64 * MIB,
        gt=0,
        validation_alias=_env("webhook_max_bytes"),
        description="largest webhook request body (inline logs), in bytes: over it 413 before the body is"
        " read; also the server's request body cap",
    )
    webhook_log_roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        validation_alias=_env("webhook_log_roots"),
        description="folders that webhook `log_paths` may point into (comma-separated); others are not read",
    )
    webhook_workers: int = Field(
        2, ge=1, le=32, validation_alias=_env("webhook_workers"), description="webhook queue worker threads"
    )
    webhook_lease_s: int = Field(
        60,
        ge=2,
        le=3600,
        validation_alias=_env("webhook_lease_s"),
        description="seconds a webhook worker holds an event between renewals; after a crash another"
        " replica or the next start takes it over within this time",
    )

    # Job sources and cluster actions (bot.jobs)
    job_sources: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=lambda: {"*": "slurm"},
        validation_alias=_env("job_sources"),
        description="job source per cluster, `CLUSTER=KIND,...` (`slurm`, `directory`, `kubernetes`;"
        " `*`: any other cluster)",
    )
    cluster_actions: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        validation_alias=_env("cluster_actions"),
        description="drain/resume/requeue per cluster, `CLUSTER=KIND,...` (`slurm`, `kubernetes`, `none`);"
        " unset: the cluster's job source kind",
    )
    job_log_template: str | None = Field(
        None,
        validation_alias=_env("job_log_template"),
        description="the `directory` job source's folder per job, e.g. `/logs/{cluster}/{job_id}/`",
    )
    cluster_actions_dry_run: bool = Field(
        False,
        validation_alias=_env("cluster_actions_dry_run"),
        description="cluster actions only say what they would run",
    )
    slurm_bin_dir: Path | None = Field(
        None,
        validation_alias=_env("slurm_bin_dir"),
        description="folder of scontrol / sacct when they are not on PATH",
    )
    kubernetes_kubeconfig: Path | None = Field(
        None,
        validation_alias=_env("kubernetes_kubeconfig"),
        description="kubeconfig of the kubernetes job source and actions (unset: in-cluster credentials,"
        " else ~/.kube/config)",
    )
    kubernetes_context: str | None = Field(
        None, validation_alias=_env("kubernetes_context"), description="kubeconfig context (unset: current)"
    )
    kubernetes_namespace: str = Field(
        "default",
        validation_alias=_env("kubernetes_namespace"),
        description="namespace of jobs named without one (`NAME` rather than `NAMESPACE/NAME`)",
    )

    # Weekly digest. Channels: a comma list of ids in the environment (`C0123,C0456`), or JSON / TOML
    # tables with their own schedule:
    #   [{"channel": "C0123", "schedule": "tue 08:30", "timezone": "Asia/Tokyo"}]
    # Without any, the digest goes to `default_channel`.
    digest_channels: Annotated[list[DigestChannel], NoDecode] = Field(
        default_factory=list,
        validation_alias=_env("digest_channels"),
        description="channels that get the weekly digest: `C0123,C0456`, or JSON/TOML tables with their own"
        " `schedule` and `timezone`; none: `default_channel`",
    )
    digest_schedule: str = Field(
        "mon 09:00",
        validation_alias=_env("digest_schedule"),
        description="when the digest is posted: a day name and a time (`mon 09:00`; no numeric weekdays)",
    )
    digest_timezone: str = Field(
        "UTC",
        validation_alias=_env("digest_timezone"),
        description="time zone of `digest_schedule` (IANA name)",
    )
    # How late a digest may still go out: APScheduler's misfire grace time, and how far back a bot that
    # was down at the slot looks when it starts. Past it, that week's digest is skipped, not posted stale.
    digest_grace_hours: float = Field(
        24.0,
        gt=0,
        le=24 * 6,
        validation_alias=_env("digest_grace_hours"),
        description="how late a missed digest may still be posted (hours); later, that week is skipped",
    )
    # "Open incidents older than N days" in the digest.
    digest_stale_days: int = Field(
        7,
        ge=1,
        le=365,
        validation_alias=_env("digest_stale_days"),
        description="the digest lists open incidents older than this many days",
    )

    # HTTP server (`ncclbot serve`)
    host: str = Field(
        "127.0.0.1", validation_alias=_env("host"), description="address `ncclbot serve` listens on"
    )
    port: int = Field(
        3000, ge=1, le=65535, validation_alias=_env("port"), description="port `ncclbot serve` listens on"
    )

    # Operations
    log_format: Literal["text", "json"] = Field(
        "text",
        validation_alias=_env("log_format"),
        description="server log lines: `text` for people, `json` (one object per line) for log collectors",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", validation_alias=_env("log_level"), description="least severe server log level written"
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("admin_users", "admin_groups", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("webhook_log_roots", mode="before")
    @classmethod
    def _path_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("job_sources", "cluster_actions", mode="before")
    @classmethod
    def _cluster_map(cls, value: Any) -> Any:
        """`a=slurm,b=kubernetes` in the environment; a TOML table in the file."""
        if not isinstance(value, str):
            return value
        mapping: dict[str, str] = {}
        for item in value.split(","):
            if not item.strip():
                continue
            cluster, sep, kind = item.partition("=")
            if not sep or not cluster.strip() or not kind.strip():
                raise ValueError(f"expected CLUSTER=KIND pairs separated by commas, got {item.strip()!r}")
            mapping[cluster.strip()] = kind.strip()
        return mapping

    @field_validator("job_sources")
    @classmethod
    def _known_sources(cls, value: dict[str, str]) -> dict[str, str]:
        from bot.jobs.sources import SOURCES  # the registry is the list of kinds

        return _known_kinds(value, set(SOURCES))

    @field_validator("cluster_actions")
    @classmethod
    def _known_actions(cls, value: dict[str, str]) -> dict[str, str]:
        from bot.jobs.actions import ACTIONS, NO_ACTIONS

        return _known_kinds(value, {*ACTIONS, NO_ACTIONS})

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

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from sqlalchemy.engine import make_url

        try:
            backend = make_url(value).get_backend_name()
        except Exception:  # SQLAlchemy's ArgumentError carries a long, multi-line message
            raise ValueError("not a database URL (sqlite:///PATH or postgresql://USER@HOST/DB)") from None
        if backend not in {"sqlite", "postgresql"}:
            raise ValueError(f"unsupported database {backend!r}: use sqlite or postgresql")
        return value

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

    def secret_values(self) -> list[str]:
        """Every configured secret in clear (the log redactor masks them wherever they appear), including
        a password inside the database URL."""
        values = [
            value.get_secret_value()
            for name in type(self).model_fields
            if isinstance(value := getattr(self, name), SecretStr)
        ]
        if self.database_url:
            from sqlalchemy.engine import make_url

            password = make_url(self.database_url).password
            if password:
                values.append(str(password))
        return values


# -- where values come from, and what is wrong with them ---------------------------------------------


@dataclass(frozen=True)
class EnvironmentOnly:
    """A variable read straight from the environment by a layer that cannot use `Settings` (the matcher and
    the probe never import bot/; the command line reads a few before any settings exist)."""

    name: str
    default: str
    description: str


ENVIRONMENT_ONLY: tuple[EnvironmentOnly, ...] = (
    EnvironmentOnly(
        CONFIG_FILE_ENV, "unset", "TOML file with the settings above (keys as in the first column)"
    ),
    EnvironmentOnly(
        "NCCLBOT_MAX_INPUT_BYTES",
        "64 GiB",
        "cap on decompressed input per diagnosis (`--max-input-bytes` per run)",
    ),
    EnvironmentOnly(
        "NCCLBOT_CACHE_DIR",
        "user cache dir",
        "where the validated signature catalog and its compiled Hyperscan databases are cached "
        "(`off`: no cache)",
    ),
    EnvironmentOnly(
        "NCCLBOT_WORKERS",
        "cores available, at most 8",
        "processes that scan plain files and spans of large ones, the main one included "
        "(`1`: all in one process)",
    ),
    EnvironmentOnly("NCCLBOT_DEBUG", "unset", "`1` prints tracebacks of internal errors"),
    EnvironmentOnly(
        "NCCLBOT_PROBE_BASELINES", "built-in", "JSON file of per-SKU busbw baselines for the probe"
    ),
    EnvironmentOnly("NCCLBOT_SSH_USER", "ssh default", "user of the ssh probe launcher"),
    EnvironmentOnly("NCCLBOT_SSH_PORT", "22", "port of the ssh probe launcher"),
    EnvironmentOnly("NCCLBOT_SSH_KEY", "ssh default", "private key of the ssh probe launcher"),
    EnvironmentOnly(
        "NCCLBOT_SSH_KNOWN_HOSTS", "ssh default", "known_hosts file the ssh probe launcher checks"
    ),
)

# Set by ncclbot itself for the processes it starts, or by the test harness: not for operators.
INTERNAL_VARIABLES = frozenset({"NCCLBOT_PROBE_LAUNCHER", "NCCLBOT_PROBE_FAULT"})
INTERNAL_PREFIXES = ("NCCLBOT_TEST_",)


def setting_names() -> list[str]:
    return list(Settings.model_fields)


def environment_names(name: str) -> tuple[str, ...]:
    """The environment variables that set field `name` (`NCCLBOT_PORT`, `SLACK_BOT_TOKEN`)."""
    alias = Settings.model_fields[name].validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias or name]
    return tuple(choice for choice in choices if isinstance(choice, str) and choice.isupper())


def is_secret(name: str) -> bool:
    return "SecretStr" in str(Settings.model_fields[name].annotation)


@dataclass(frozen=True)
class Sources:
    """Where settings come from: the environment and the parsed TOML file (if any)."""

    environ: Mapping[str, str]
    config_file: Path | None = None
    file_values: Mapping[str, Any] = field(default_factory=dict)

    def origin(self, name: str) -> str:
        """Where field `name` got its value: an environment variable, a TOML key, or `default`."""
        present = {key.upper() for key in self.environ}
        for env in environment_names(name):
            if env in present:
                return env
        if name in self.file_values or any(env in self.file_values for env in environment_names(name)):
            return f"{self.config_file}: {name}"
        return "default"

    def unknown_variables(self) -> list[str]:
        """`NCCLBOT_*` variables that nothing reads: most often a typo that would silently leave the
        default in force (NCCLBOT_DATABSE_URL, and the bot writes to SQLite instead of PostgreSQL)."""
        known = set(known_variables()) | INTERNAL_VARIABLES
        return sorted(
            key
            for key in (key.upper() for key in self.environ)
            if key.startswith("NCCLBOT_") and key not in known and not key.startswith(INTERNAL_PREFIXES)
        )


def known_variables() -> list[str]:
    names = [env for name in setting_names() for env in environment_names(name)]
    return names + [variable.name for variable in ENVIRONMENT_ONLY]


def read_sources(environ: Mapping[str, str] | None = None) -> Sources:
    environ = os.environ if environ is None else environ
    config_file = environ.get(CONFIG_FILE_ENV)
    if not config_file:
        return Sources(environ)
    path = Path(config_file)
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SettingsError(f"{CONFIG_FILE_ENV}={config_file}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsError(f"{CONFIG_FILE_ENV}={config_file}: cannot read it ({error})") from None
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{CONFIG_FILE_ENV}={config_file}: not valid TOML ({error})") from None
    return Sources(environ, path, values)


def _suggestion(unknown: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(unknown, candidates, n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def _validation_problems(error: ValidationError, sources: Sources) -> list[str]:
    problems = []
    for problem in error.errors():
        key = str(problem["loc"][0]) if problem["loc"] else ""
        if problem["type"] == "extra_forbidden":
            where = f"{sources.config_file}: {key}" if sources.config_file else key
            problems.append(f"{where}: unknown setting{_suggestion(key, setting_names())}")
            continue
        name = key if key in Settings.model_fields else _field_of_alias(key)
        where = sources.origin(name) if name else key or "settings"
        if where == "default" and name:
            where = environment_names(name)[0] if environment_names(name) else name
        message = problem["msg"].removeprefix("Value error, ")
        if name and not is_secret(name) and problem["type"] != "value_error" and "input" in problem:
            message += f" (got {problem['input']!r})"
        problems.append(f"{where}: {message}")
    return problems


def _field_of_alias(alias: str) -> str | None:
    for name in setting_names():
        if alias.upper() in environment_names(name):
            return name
    return None


def consistency_problems(settings: Settings, *, for_server: bool = True) -> list[str]:
    """Problems no single field shows: half a Slack set-up, tokens swapped or of the wrong kind.

    A command that only posts (`ncclbot digest --post`) needs the bot token but no signing secret.
    Messages say "X is missing" rather than "X: missing", which the log redactor would read as a
    secret's value."""
    problems = []
    bot, signing, app = settings.slack_bot_token, settings.slack_signing_secret, settings.slack_app_token
    if bot is None and (signing is not None or app is not None):
        given = "SLACK_APP_TOKEN" if app is not None else "SLACK_SIGNING_SECRET"
        problems.append(f"SLACK_BOT_TOKEN is missing ({given} is set; Slack needs the bot token to post)")
    if for_server and bot is not None and signing is None and app is None:
        problems.append(
            "SLACK_SIGNING_SECRET is missing (requests to /slack/events cannot be verified without it;"
            " or set SLACK_APP_TOKEN to use Socket Mode)"
        )
    if bot is not None and not bot.get_secret_value().startswith("xoxb-"):
        problems.append("SLACK_BOT_TOKEN: not a bot token (they start with xoxb-)")
    if app is not None and not app.get_secret_value().startswith("xapp-"):
        problems.append("SLACK_APP_TOKEN: not an app-level token (they start with xapp-)")
    return problems


def _known_kinds(mapping: dict[str, str], known: set[str]) -> dict[str, str]:
    for cluster, kind in mapping.items():
        if kind not in known:
            raise ValueError(f"{cluster}={kind}: unknown kind; known: {', '.join(sorted(known))}")
    return mapping


def load_settings(*, for_server: bool = True, **overrides: Any) -> Settings:
    """Read and validate the settings (os.environ and NCCLBOT_CONFIG); raise SettingsError with one line
    per problem, each naming the environment variable or TOML key to fix. `for_server=False` is for
    commands that do not receive Slack requests."""
    sources = read_sources()
    problems = [
        f"{variable}: unknown setting{_suggestion(variable, known_variables())}"
        for variable in sources.unknown_variables()
    ]
    settings: Settings | None = None
    try:
        settings = Settings(**overrides)
    except ValidationError as error:
        problems += _validation_problems(error, sources)
        settings = _without_invalid_fields(error, overrides)
    if settings is not None:
        problems += consistency_problems(settings, for_server=for_server)
    if problems or settings is None:
        raise SettingsError(problems)
    return settings


def _without_invalid_fields(error: ValidationError, overrides: dict[str, Any]) -> Settings | None:
    """The settings with each invalid field at its default, so that the checks across fields report
    their problems in the same run (None when that fails too, e.g. on unknown keys in the file)."""
    defaults = {
        name: Settings.model_fields[name].get_default(call_default_factory=True)
        for problem in error.errors()
        if problem["loc"] and (name := str(problem["loc"][0])) in Settings.model_fields
    }
    try:
        return Settings(**{**overrides, **defaults})
    except ValidationError:
        return None
