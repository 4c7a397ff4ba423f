from __future__ import annotations

from pathlib import Path

import platformdirs

from bot.store.settings import database_url, default_sqlite_path, normalise_url


def test_default_is_a_sqlite_file_in_the_user_data_dir() -> None:
    path = default_sqlite_path()
    assert path == Path(platformdirs.user_data_dir("ncclbot", appauthor=False)) / "ncclbot.sqlite3"
    assert database_url(environ={}) == f"sqlite:///{path}"


def test_environment_then_argument() -> None:
    env = {"NCCLBOT_DATABASE_URL": "postgresql://bot@db:5432/ncclbot"}
    assert database_url(environ=env) == "postgresql+psycopg://bot@db:5432/ncclbot"
    assert database_url("sqlite:////tmp/x.sqlite3", environ=env) == "sqlite:////tmp/x.sqlite3"
    assert database_url(environ={"NCCLBOT_DATABASE_URL": "  "}).startswith("sqlite:///")


def test_postgres_urls_use_psycopg3() -> None:
    assert normalise_url("postgres://u@h/d") == "postgresql+psycopg://u@h/d"
    assert normalise_url("postgresql+psycopg://u@h/d") == "postgresql+psycopg://u@h/d"
