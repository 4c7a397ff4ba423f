"""Revision 0007 (digest claims, miner state, residue samples) on both backends: up from the revision
before it with data in place, and back down."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import inspect

from bot.store import Store, migrate
from bot.store.engine import create_store_engine

REVISION = "0007"
TABLES = {"digests", "miner_states", "residue_samples"}
T = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _previous() -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate.alembic_config()).get_revision(REVISION)
    assert script is not None and isinstance(script.down_revision, str)
    return script.down_revision


def test_up_from_the_previous_revision_and_down_again(database_url: str) -> None:
    engine = create_store_engine(database_url)
    try:
        migrate.upgrade(engine, _previous())
        assert not TABLES & set(inspect(engine).get_table_names())
        migrate.upgrade(engine)
        assert set(inspect(engine).get_table_names()) >= TABLES
        with Store(engine) as store:
            claim = store.claim_digest(
                "C0X", "2026-W49", as_of=T, claimant="a", lease=timedelta(minutes=10), now=T
            )
            again = store.claim_digest(
                "C0X", "2026-W49", as_of=T, claimant="b", lease=timedelta(minutes=10), now=T
            )
            assert (claim.outcome, again.outcome, again.id) == ("claimed", "in-progress", claim.id)
        migrate.downgrade(engine, _previous())
        assert not TABLES & set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
