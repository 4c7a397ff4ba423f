"""`ncclbot config check` as an operator runs it: the effective settings with where each came from,
secrets never printed, and exit status 2 with one line per problem."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.server.helpers import ROOT, clean_environment

BOT_TOKEN = "xoxb-123-456-AbCdEfGhIjKlMnOp"
SIGNING_SECRET = "8f14e45fceea167a5a36dedd4bea2543"
DB_PASSWORD = "pg-pass-Zq81"


def ncclbot(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=ROOT,
        env=clean_environment(env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def configured(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "ncclbot.toml"
    config.write_text('default_channel = "C0INCIDENTS"\nlog_format = "json"\n')
    return {
        "NCCLBOT_CONFIG": str(config),
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "NCCLBOT_DATABASE_URL": f"postgresql://ncclbot:{DB_PASSWORD}@db:5432/ncclbot",
        "NCCLBOT_PORT": "8080",
        "NCCLBOT_MAX_INPUT_BYTES": "8G",
    }


def test_check_prints_every_setting_and_where_it_came_from_without_secrets(tmp_path: Path) -> None:
    env = configured(tmp_path)
    result = ncclbot("config", "check", env=env)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[1:] if line.startswith("  ")}
    assert "  NCCLBOT_MAX_INPUT_BYTES=8G" in result.stdout.splitlines()
    assert rows["port"][1:] == ["8080", "NCCLBOT_PORT"]
    assert rows["default_channel"][1:] == ["C0INCIDENTS", f"{env['NCCLBOT_CONFIG']}:", "default_channel"]
    assert rows["slack_bot_token"][1:] == ["********", "SLACK_BOT_TOKEN"]
    assert rows["host"][1:] == ["127.0.0.1", "default"]
    for secret in (BOT_TOKEN, SIGNING_SECRET, DB_PASSWORD):
        assert secret not in result.stdout + result.stderr


def test_check_json_is_one_document_with_values_and_origins(tmp_path: Path) -> None:
    env = configured(tmp_path)
    result = ncclbot("config", "check", "--json", env=env)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["valid"] is True
    settings = document["settings"]
    assert settings["log_format"]["value"] == "json"
    assert settings["slack_signing_secret"] == {"value": "********", "from": "SLACK_SIGNING_SECRET"}
    assert settings["database_url"]["value"] == "postgresql://ncclbot:[REDACTED]@db:5432/ncclbot"
    assert settings["webhook_secret"] == {"value": None, "from": "default"}
    assert document["environment_only"] == {
        "NCCLBOT_CONFIG": env["NCCLBOT_CONFIG"],
        "NCCLBOT_MAX_INPUT_BYTES": "8G",
    }


def test_check_exits_2_with_one_line_per_problem() -> None:
    result = ncclbot(
        "config",
        "check",
        env={"NCCLBOT_PORT": "0x50", "NCCLBOT_HOTS": "0.0.0.0", "SLACK_SIGNING_SECRET": "s" * 32},
    )
    assert result.returncode == 2
    assert result.stdout == ""
    problems = [line for line in result.stderr.splitlines() if line.startswith("ncclbot: setting ")]
    assert len(problems) == 3, result.stderr
    assert "ncclbot: setting NCCLBOT_HOTS: unknown setting (did you mean NCCLBOT_HOST?)" in problems
    assert "Traceback" not in result.stderr
    assert "s" * 32 not in result.stderr


def test_serve_refuses_the_same_problems_before_listening() -> None:
    result = ncclbot(
        "serve", "--port", "0", env={"SLACK_BOT_TOKEN": "xapp-1-A-1-x", "SLACK_APP_TOKEN": "xoxb-1"}
    )
    assert result.returncode == 2
    assert "ncclbot: setting SLACK_BOT_TOKEN: not a bot token (they start with xoxb-)" in result.stderr
    assert "serving on" not in result.stdout
