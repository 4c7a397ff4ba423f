"""deploy/compose.yml: parsed and interpolated by podman-compose, and shaped as the README promises
(the bot waits for a healthy PostgreSQL, both keep their data in volumes, both have health checks)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.settings import known_variables
from tests.conftest import need_service

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def compose_config(
    tmp_path: Path, env: dict[str, str], dot_env: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`podman-compose config` on a copy of deploy/, with ncclbot.env made from the example as users do."""
    podman_compose = Path(sys.executable).with_name("podman-compose")
    need_service(podman_compose.exists() and bool(shutil.which("podman")), "podman and podman-compose")
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    shutil.copy(DEPLOY / "compose.yml", deploy / "compose.yml")
    shutil.copy(DEPLOY / "ncclbot.env.example", deploy / "ncclbot.env")
    if dot_env is not None:
        (deploy / ".env").write_text(dot_env)
    return subprocess.run(
        [str(podman_compose), "-f", str(deploy / "compose.yml"), "config"],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def config(tmp_path: Path) -> dict[str, Any]:
    result = compose_config(tmp_path, {"POSTGRES_PASSWORD": "pw-for-the-test"})
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = yaml.safe_load(result.stdout)
    return parsed


def test_the_bot_waits_for_a_healthy_database_and_uses_it(config: dict[str, Any]) -> None:
    bot, db = config["services"]["bot"], config["services"]["db"]
    assert bot["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert "/readyz" in " ".join(bot["healthcheck"]["test"])
    assert (
        bot["environment"]["NCCLBOT_DATABASE_URL"] == "postgresql://ncclbot:pw-for-the-test@db:5432/ncclbot"
    )
    assert db["environment"]["POSTGRES_PASSWORD"] == "pw-for-the-test"


def test_data_lives_in_named_volumes(config: dict[str, Any]) -> None:
    assert set(config["volumes"]) == {"db-data", "bot-data"}
    assert "bot-data:/var/lib/ncclbot" in config["services"]["bot"]["volumes"]
    assert "db-data:/var/lib/postgresql/data" in config["services"]["db"]["volumes"]


def test_the_bot_is_built_from_the_dockerfile_and_locked_down(config: dict[str, Any]) -> None:
    bot = config["services"]["bot"]
    assert bot["build"]["dockerfile"] == "deploy/docker/Dockerfile"
    assert (Path(bot["build"]["context"]) / bot["build"]["dockerfile"]).name == "Dockerfile"
    assert bot["read_only"] is True and bot["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in bot["security_opt"]


def test_a_missing_database_password_is_refused_by_name(tmp_path: Path) -> None:
    result = compose_config(tmp_path, {})
    assert result.returncode != 0
    assert "set POSTGRES_PASSWORD in deploy/.env" in result.stderr


def test_the_example_environment_file_names_only_known_settings() -> None:
    names = [
        line.lstrip("# ").split("=", 1)[0]
        for line in (DEPLOY / "ncclbot.env.example").read_text().splitlines()
        if "=" in line and line.lstrip("# ")[:1].isupper()
    ]
    assert names and set(names) <= set(known_variables()), set(names) - set(known_variables())


def test_the_password_written_to_deploy_dot_env_as_the_readme_says_is_used(tmp_path: Path) -> None:
    result = compose_config(tmp_path, {}, dot_env="POSTGRES_PASSWORD=from-dot-env\n")
    assert result.returncode == 0, result.stderr
    bot = yaml.safe_load(result.stdout)["services"]["bot"]
    assert bot["environment"]["NCCLBOT_DATABASE_URL"] == "postgresql://ncclbot:from-dot-env@db:5432/ncclbot"
