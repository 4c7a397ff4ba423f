"""One typed settings object for the server and every front end: environment variables, optionally a
TOML file (`NCCLBOT_CONFIG=/etc/ncclbot.toml`, keys named like the fields), validated once at start.

Environment names follow DESIGN.md: Slack's own variables keep their usual names (`SLACK_BOT_TOKEN`...),
everything else is `NCCLBOT_<FIELD>`. The environment wins over the file. Secrets are `SecretStr`, so a
settings object printed or logged never shows them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
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
    """Invalid settings: one line per problem, ready to print."""


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
    # Without a Slack bot token, messages can go to a JSON-lines file instead (bot.services.file_outlet).
    outlet_file: Path | None = Field(None, validation_alias=_env("outlet_file"))
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

    # Webhook (bot.webhook): HMAC secret for signed senders, bearer token for those that cannot sign
    # (Alertmanager), the cap on inline logs, where payload log paths may point, worker threads.
    webhook_secret: SecretStr | None = Field(None, validation_alias=_env("webhook_secret"))
    webhook_bearer_token: SecretStr | None = Field(None, validation_alias=_env("webhook_bearer_token"))
    webhook_max_bytes: int = Field(64 * MIB, gt=0, validation_alias=_env("webhook_max_bytes"))
    webhook_log_roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list, validation_alias=_env("webhook_log_roots")
    )
    webhook_workers: int = Field(2, ge=1, le=32, validation_alias=_env("webhook_workers"))
    # How long a worker holds an event without renewing its lease (it renews every third of it): after
    # a crash, the next start or another replica takes the event over within this time.
    webhook_lease_s: int = Field(60, ge=2, le=3600, validation_alias=_env("webhook_lease_s"))

    # Job sources and cluster actions (bot.jobs). `job_sources` maps a cluster to a source kind
    # (slurm, directory, kubernetes), `*` for any other cluster; `cluster_actions` likewise (slurm,
    # kubernetes, none), following the job source when a cluster is not named.
    job_sources: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=lambda: {"*": "slurm"}, validation_alias=_env("job_sources")
    )
    cluster_actions: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict, validation_alias=_env("cluster_actions")
    )
    job_log_template: str | None = Field(None, validation_alias=_env("job_log_template"))
    cluster_actions_dry_run: bool = Field(False, validation_alias=_env("cluster_actions_dry_run"))
    slurm_bin_dir: Path | None = Field(None, validation_alias=_env("slurm_bin_dir"))
    kubernetes_kubeconfig: Path | None = Field(None, validation_alias=_env("kubernetes_kubeconfig"))
    kubernetes_context: str | None = Field(None, validation_alias=_env("kubernetes_context"))
    kubernetes_namespace: str = Field("default", validation_alias=_env("kubernetes_namespace"))

    # HTTP server (`ncclbot serve`)
    host: str = Field("127.0.0.1", validation_alias=_env("host"))
    port: int = Field(3000, ge=1, le=65535, validation_alias=_env("port"))

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


def _known_kinds(mapping: dict[str, str], known: set[str]) -> dict[str, str]:
    for cluster, kind in mapping.items():
        if kind not in known:
            raise ValueError(f"{cluster}={kind}: unknown kind; known: {', '.join(sorted(known))}")
    return mapping


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
