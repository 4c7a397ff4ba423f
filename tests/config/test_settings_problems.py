"""Settings are validated once, at start: every problem is one line that names what to change (the
environment variable, or the TOML file and key), and all of them are reported together."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import SettingsError, load_settings


def problems(monkeypatch: pytest.MonkeyPatch, **environment: str) -> list[str]:
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as raised:
        load_settings()
    assert "\n".join(raised.value.problems) == str(raised.value)
    return raised.value.problems


def test_every_bad_variable_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    found = problems(
        monkeypatch,
        NCCLBOT_PORT="http",
        SLACK_API_URL="ftp://slack.example",
        NCCLBOT_LOG_FORMAT="xml",
    )
    assert len(found) == 3, found
    by_name = {line.split(":", 1)[0]: line for line in found}
    assert set(by_name) == {"NCCLBOT_PORT", "SLACK_API_URL", "NCCLBOT_LOG_FORMAT"}
    assert "(got 'http')" in by_name["NCCLBOT_PORT"]
    assert "http(s) URL" in by_name["SLACK_API_URL"]


def test_a_misspelt_variable_is_refused_with_the_likely_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # Silently ignored, this typo would leave the default SQLite file in use instead of PostgreSQL.
    [line] = problems(monkeypatch, NCCLBOT_DATABSE_URL="postgresql://bot@db/ncclbot")
    assert line == "NCCLBOT_DATABSE_URL: unknown setting (did you mean NCCLBOT_DATABASE_URL?)"


def test_test_harness_and_environment_only_variables_are_known(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCLBOT_TEST_POSTGRES_URL", "postgresql://x@127.0.0.1/y")
    monkeypatch.setenv("NCCLBOT_MAX_INPUT_BYTES", "1G")
    monkeypatch.setenv("NCCLBOT_SSH_USER", "probe")
    assert load_settings().port == 3000


def test_problems_in_the_file_name_the_file_and_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "ncclbot.toml"
    config.write_text('port = "x"\ndatabse_url = "sqlite:///tmp/x"\n')
    found = problems(monkeypatch, NCCLBOT_CONFIG=str(config))
    assert sorted(found) == sorted(
        [
            f"{config}: port: Input should be a valid integer, unable to parse string as an integer"
            " (got 'x')",
            f"{config}: databse_url: unknown setting (did you mean database_url?)",
        ]
    )


def test_the_environment_wins_over_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "ncclbot.toml"
    config.write_text('port = 4000\nhost = "0.0.0.0"\n')
    monkeypatch.setenv("NCCLBOT_CONFIG", str(config))
    monkeypatch.setenv("NCCLBOT_PORT", "5000")
    settings = load_settings()
    assert (settings.host, settings.port) == ("0.0.0.0", 5000)


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "no such file"), ("port = = 3", "not valid TOML"), (b"\xff\xfe", "cannot read it")],
)
def test_an_unusable_file_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str | bytes | None, expected: str
) -> None:
    config = tmp_path / "ncclbot.toml"
    if isinstance(content, str):
        config.write_text(content)
    elif isinstance(content, bytes):
        config.write_bytes(content)
    [line] = problems(monkeypatch, NCCLBOT_CONFIG=str(config))
    assert line.startswith(f"NCCLBOT_CONFIG={config}: {expected}")


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        (
            {"SLACK_SIGNING_SECRET": "8f14e45fceea167a"},
            "SLACK_BOT_TOKEN is missing (SLACK_SIGNING_SECRET is set",
        ),
        ({"SLACK_APP_TOKEN": "xapp-1-A0-1-abc"}, "SLACK_BOT_TOKEN is missing (SLACK_APP_TOKEN is set"),
        ({"SLACK_BOT_TOKEN": "xoxb-1-2-abc"}, "SLACK_SIGNING_SECRET is missing"),
        # The classic Socket Mode mistake: the two tokens swapped.
        (
            {"SLACK_BOT_TOKEN": "xapp-1-A0-1-abc", "SLACK_APP_TOKEN": "xoxb-1-2-abc"},
            "SLACK_BOT_TOKEN: not a bot token",
        ),
    ],
)
def test_half_a_slack_set_up_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], expected: str
) -> None:
    found = problems(monkeypatch, **environment)
    assert any(line.startswith(expected) for line in found), found


def test_socket_mode_needs_no_signing_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1-2-abc")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1-A0-1-abc")
    assert load_settings().slack_app_token is not None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql://bot@db/ncclbot", "unsupported database 'mysql'"),
        ("not a url", "not a database URL"),
    ],
)
def test_a_bad_database_url_is_named(monkeypatch: pytest.MonkeyPatch, url: str, expected: str) -> None:
    [line] = problems(monkeypatch, NCCLBOT_DATABASE_URL=url)
    assert line.startswith(f"NCCLBOT_DATABASE_URL: {expected}")


def test_secrets_include_the_database_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCLBOT_DATABASE_URL", "postgresql://bot:pg-s3cret-pw@db:5432/ncclbot")
    monkeypatch.setenv("NCCLBOT_WEBHOOK_SECRET", "webhook-secret-value")
    assert set(load_settings().secret_values()) == {"pg-s3cret-pw", "webhook-secret-value"}
