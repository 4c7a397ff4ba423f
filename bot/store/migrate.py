"""Bring a database to the newest schema with the Alembic migrations shipped in this package.

Several replicas may start together: on PostgreSQL the upgrade runs under a session advisory lock, on
SQLite inside a write transaction, so exactly one of them migrates and the others find the head.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text
from sqlalchemy.engine import Connection

from bot.store.engine import WRITE_OPTION, StoreError

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

# Arbitrary constant shared by every replica: the advisory lock's name.
MIGRATION_LOCK_KEY = 0x6E63636C62_01  # "ncclb" + 1


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the package ships no migrations"
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> str | None:
    """Migrate to `revision` (default: head); returns the revision the database is at afterwards."""
    current = current_revision(engine)
    if revision == "head" and current == head_revision():
        return current  # the common case: no lock, no transaction
    known = {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if current is not None and current not in known:
        raise StoreError(
            f"the database schema is at revision {current!r}, which this ncclbot does not know;"
            " it was written by a newer version"
        )
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            connection.commit()
            try:
                with connection.begin():
                    command.upgrade(alembic_config(connection), revision)
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
                connection.commit()
    else:
        with engine.connect().execution_options(**{WRITE_OPTION: True}) as connection, connection.begin():
            command.upgrade(alembic_config(connection), revision)
    return current_revision(engine)


def downgrade(engine: Engine, revision: str) -> None:
    """For tests of the migrations themselves."""
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), revision)
