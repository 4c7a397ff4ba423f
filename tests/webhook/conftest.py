"""The store fixtures (each test on SQLite and on PostgreSQL) for webhook tests."""

from tests.store.conftest import database_url, postgres_url, sqlite_url, store

__all__ = ["database_url", "postgres_url", "sqlite_url", "store"]
