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

    # HTTP server (`ncclbot serve`)
    host: str = Field("127.0.0.1", validation_alias=_env("host"))
    port: int = Field(3000, ge=1, le=65535, validation_alias=_env("port"))

    @field_validator("admin_users", "admin_groups", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

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
