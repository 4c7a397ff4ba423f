"""Store fixtures: every store test runs against a SQLite file and against a real PostgreSQL server
(NCCLBOT_TEST_POSTGRES_URL, started by .ci/services/postgres.sh), each test in a fresh database."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bot.store import Store
from bot.store.settings import normalise_url
from tests.conftest import need_service

POSTGRES_ENV = "NCCLBOT_TEST_POSTGRES_URL"

# A fixed clock for seeded histories: every figure a test checks follows from these times alone.
T0 = datetime(2026, 11, 20, 3, 11, tzinfo=UTC)


def _postgres_admin_url() -> str:
    url = os.environ.get(POSTGRES_ENV, "")
    need_service(bool(url), f"{POSTGRES_ENV} is not set (source .ci/services/postgres.sh)")
    return normalise_url(url)


def _admin_execute(admin_url: str, statement: str) -> None:
    import psycopg

    conninfo = make_url(admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as connection:
            connection.execute(statement)
    except psycopg.OperationalError as error:
        need_service(False, f"PostgreSQL at {POSTGRES_ENV} is not reachable: {error}")


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database, dropped afterwards."""
    admin_url = _postgres_admin_url()
    name = f"ncclbot_test_{uuid.uuid4().hex[:12]}"
    _admin_execute(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        _admin_execute(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.sqlite3'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """Each test that takes this runs once per backend."""
    fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    with Store.open(database_url) as opened:
        yield opened
