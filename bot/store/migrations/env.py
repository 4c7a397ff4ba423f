"""Alembic environment: runs on the connection the store hands over (Config.attributes["connection"]),
or, for the `alembic` command line, on the database NCCLBOT_DATABASE_URL (or the default file) names."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from bot.store.models import Base


def run_on(connection: Connection) -> None:
    # Batch mode: SQLite can only alter tables by copying them.
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        run_on(connection)
        return
    from bot.store.engine import create_store_engine
    from bot.store.settings import database_url

    engine = create_store_engine(database_url())
    with engine.connect() as own_connection:
        run_on(own_connection)
        own_connection.commit()
    engine.dispose()


main()
