"""Alembic migrations on both backends: from empty, from the previous revision, back down, and with
several processes starting at once."""

from __future__ import annotations

import multiprocessing
import warnings
from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from bot.store import Store, StoreError, migrate
from bot.store.engine import create_store_engine
from bot.store.models import Base

PREVIOUS = "0001"


def _schema_drift(url: str) -> list[object]:
    engine = create_store_engine(url)
    try:
        with engine.connect() as connection, warnings.catch_warnings():
            # Expression indexes (the idempotency key) cannot be reflected; checked separately below.
            warnings.simplefilter("ignore")
            return list(compare_metadata(MigrationContext.configure(connection), Base.metadata))
    finally:
        engine.dispose()


def _index_names(url: str, table: str) -> set[str]:
    engine = create_store_engine(url)
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "sqlite":
                rows = connection.execute(text(f"PRAGMA index_list('{table}')")).all()
                return {row[1] for row in rows}
            rows = connection.execute(
                text("SELECT indexname FROM pg_indexes WHERE tablename = :t"), {"t": table}
            ).all()
            return {row[0] for row in rows}
    finally:
        engine.dispose()


def test_from_empty_to_head_matches_the_models(database_url: str) -> None:
    engine = create_store_engine(database_url)
    try:
        assert migrate.current_revision(engine) is None
        assert migrate.upgrade(engine) == migrate.head_revision()
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"nodes", "incidents", "occurrences", "probe_runs", "feedback", "audit_log"} <= tables
    assert _schema_drift(database_url) == []
    assert "uq_occurrences_job_digest" in _index_names(database_url, "occurrences")


def test_from_previous_revision_keeps_the_data(database_url: str) -> None:
    engine = create_store_engine(database_url)
    seen = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    try:
        assert migrate.upgrade(engine, PREVIOUS) == PREVIOUS
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO incidents (id, fingerprint, class_id, culprit_hosts, culprit_ranks, status,"
                    " first_seen, last_seen, occurrences) VALUES (1, 'v1:x', 'cuda/oom', '[]', '[]', 'open',"
                    " :t, :t, 1)"
                ),
                {"t": seen.replace(tzinfo=None) if engine.dialect.name == "sqlite" else seen},
            )
            connection.execute(
                text(
                    "INSERT INTO occurrences (incident_id, occurred_at, source, input_digest, class_id,"
                    " confidence, evidence_excerpt, ranks)"
                    " VALUES (1, :t, 'cli', 'abc', 'cuda/oom', 0.5, '', '[]')"
                ),
                {"t": seen.replace(tzinfo=None) if engine.dialect.name == "sqlite" else seen},
            )
        assert "ix_occurrences_class_id_occurred_at" not in _index_names(database_url, "occurrences")
        assert migrate.upgrade(engine) == migrate.head_revision()
    finally:
        engine.dispose()
    indexes = _index_names(database_url, "occurrences")
    assert {"ix_occurrences_class_id_occurred_at", "ix_occurrences_recurrence_cover"} <= indexes
    assert "ix_occurrences_occurred_at" not in indexes  # replaced by the covering index
    assert _schema_drift(database_url) == []
    with Store.open(database_url) as store:
        [incident] = store.incidents()
        assert (incident.fingerprint, incident.occurrences, incident.first_seen) == ("v1:x", 1, seen)
        [occurrence] = store.history(days=60, now=datetime(2026, 11, 20, tzinfo=UTC))
        assert occurrence.class_id == "cuda/oom"
        assert occurrence.analysis_version is None  # stored before diagnoses named their version


# SQLite's batch mode copies the table and cannot reflect the expression index it then recreates.
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_downgrade_and_upgrade_again(database_url: str) -> None:
    engine = create_store_engine(database_url)
    try:
        migrate.upgrade(engine)
        migrate.downgrade(engine, PREVIOUS)
        assert migrate.current_revision(engine) == PREVIOUS
        columns = {c["name"] for c in inspect(engine).get_columns("occurrences")}
        assert not {"since_progress_ms", "analysis_version"} & columns
        migrate.downgrade(engine, "base")
        assert migrate.current_revision(engine) is None
        assert migrate.upgrade(engine) == migrate.head_revision()
    finally:
        engine.dispose()


def _open_store(url: str, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait(timeout=30)
    Store.open(url).close()


def test_replicas_starting_together_migrate_once(database_url: str) -> None:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(4)
    processes = [context.Process(target=_open_store, args=(database_url, barrier)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert [p.exitcode for p in processes] == [0, 0, 0, 0]
    engine = create_store_engine(database_url)
    try:
        assert migrate.current_revision(engine) == migrate.head_revision()
    finally:
        engine.dispose()


def test_a_schema_from_a_newer_version_is_a_clear_error(database_url: str) -> None:
    engine = create_store_engine(database_url)
    try:
        migrate.upgrade(engine)
        with engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        with pytest.raises(StoreError, match=r"revision '9999'.*newer version"):
            migrate.upgrade(engine)
    finally:
        engine.dispose()
