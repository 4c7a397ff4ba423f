"""Engine construction: the connection settings each backend needs for safe concurrent use."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, make_url

from matcher.analysis.redact import redact

# Execution option that makes a SQLite transaction take the write lock at BEGIN. A deferred transaction
# that reads first and writes later fails with SQLITE_BUSY when another writer committed in between,
# and no busy timeout helps then.
WRITE_OPTION = "ncclbot_write"

SQLITE_BUSY_TIMEOUT_MS = 10_000


class StoreError(Exception):
    """The store cannot do what was asked (bad URL, unknown incident...); the message stands alone."""


def conflict_insert(bind: Engine | Connection, model: Any) -> postgresql.Insert | sqlite.Insert:
    """An INSERT into `model` in the dialect of `bind` (PostgreSQL or SQLite, the two stores), so that
    `on_conflict_do_nothing` / `on_conflict_do_update` are at hand."""
    return (postgresql if bind.dialect.name == "postgresql" else sqlite).insert(model)


def database_error_reason(error: BaseException) -> str:
    """One line saying why the database failed: the driver's own message (SQLAlchemy wraps it in
    `orig` with a multi-line background note) or, failing that, the error itself; credentials masked
    (drivers and our own messages quote the URL)."""
    cause = getattr(error, "orig", None) or error
    lines = str(cause).strip().splitlines()
    return redact(lines[0]) if lines else type(cause).__name__


def create_store_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except Exception as error:  # SQLAlchemy raises ArgumentError with a long message
        raise StoreError(f"cannot parse database URL {redact(url)!r}") from error
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, parsed.database)
    if parsed.get_backend_name() == "postgresql":
        return create_engine(parsed, pool_pre_ping=True)
    raise StoreError(f"unsupported database {parsed.get_backend_name()!r}: use sqlite or postgresql")


def _ensure_wal(dbapi_connection: sqlite3.Connection) -> None:
    """Switch the file to WAL (persistent, so normally once). The switch does not wait on the busy
    timeout: when several processes open a new file together, it is retried for a while."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            mode = dbapi_connection.execute("PRAGMA journal_mode").fetchone()
            if mode and str(mode[0]).lower() == "wal":
                return
            dbapi_connection.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _sqlite_engine(url: str, database: str | None) -> Engine:
    if not database or database == ":memory:":
        raise StoreError("the store needs a SQLite file, not an in-memory database")
    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Take transaction control from pysqlite so that BEGIN is ours (see the begin hook).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()
        _ensure_wal(dbapi_connection)

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine
