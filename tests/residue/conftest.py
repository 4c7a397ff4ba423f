"""Residue tests run on a SQLite file and on PostgreSQL, like the store's (same fixtures)."""

import os

import pytest

from tests.store.conftest import database_url, postgres_url, sqlite_url, store

__all__ = ["database_url", "postgres_url", "sqlite_url", "store"]


@pytest.fixture(autouse=True)
def settings_from_the_test_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own NCCLBOT_* / SLACK_* settings never reach a digest test."""
    for name in list(os.environ):
        if (name.startswith("NCCLBOT_") and not name.startswith("NCCLBOT_TEST_")) or name.startswith(
            "SLACK_"
        ):
            monkeypatch.delenv(name)
