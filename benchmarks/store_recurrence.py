"""Recurrence queries over one million stored occurrences on PostgreSQL.

Seeds a scratch database server-side (INSERT ... SELECT FROM generate_series: no round trip per row),
then times the queries the product runs (through `bot.store.Store`, the real code path) against a
trivial baseline query in the same run, and prints the figures.

    source .ci/services/postgres.sh          # or any PostgreSQL you may create a database on
    /work/venv/bin/python benchmarks/store_recurrence.py [--url URL] [--rows 1000000]

Exits 1 when a recurrence query takes a second or more (median of the runs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from sqlalchemy import text
from sqlalchemy.engine import make_url

from bot.store import Store
from bot.store.recurrence import recurrence_line
from bot.store.settings import normalise_url
from matcher.taxonomy import CLASSES

BENCH_DATABASE = "ncclbot_bench_recurrence"
NODES = 2000
INCIDENTS = 50_000
HISTORY_DAYS = 365
RUNS = 7
LIMIT_S = 1.0


def _conninfo(url: str, database: str | None = None) -> str:
    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


def _recreate_database(admin_url: str) -> str:
    with psycopg.connect(_conninfo(admin_url), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{BENCH_DATABASE}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{BENCH_DATABASE}"')
    return make_url(admin_url).set(database=BENCH_DATABASE).render_as_string(hide_password=False)


def _seed(url: str, rows: int, now: datetime) -> float:
    classes = sorted(CLASSES)
    started = time.perf_counter()
    with psycopg.connect(_conninfo(url)) as connection:
        # The test server commits asynchronously; VACUUM cannot mark pages all-visible before the
        # commit record is flushed, so this load commits synchronously.
        connection.execute("SET synchronous_commit = on")
        params = {
            "now": now,
            "classes": classes,
            "nodes": NODES,
            "incidents": INCIDENTS,
            "days": HISTORY_DAYS,
        }
        connection.execute(
            "INSERT INTO nodes (id, hostname, cluster, first_seen)"
            " SELECT n, 'gpu-node-' || lpad(n::text, 4, '0'), 'bench', %(now)s - interval '400 days'"
            " FROM generate_series(1, %(nodes)s) AS n",
            params,
        )
        # Class and node are spread unevenly (modular skew), so some classes and nodes are hot.
        connection.execute(
            "INSERT INTO incidents (id, fingerprint, class_id, node_id, culprit_hosts, culprit_ranks,"
            " cluster, status, first_seen, last_seen, occurrences)"
            " SELECT i, 'v1:' || md5(i::text),"
            " (%(classes)s::text[])[1 + (i * 7) %% array_length(%(classes)s::text[], 1)],"
            " 1 + (i * 31) %% %(nodes)s, '[]', '[]', 'bench', 'open', %(now)s, %(now)s, 0"
            " FROM generate_series(1, %(incidents)s) AS i",
            params,
        )
        connection.execute(
            "INSERT INTO occurrences (incident_id, occurred_at, source, job_id, cluster, input_digest,"
            " class_id, node_id, confidence, evidence_excerpt, ranks, world_size, timeout_ms, gpu_hours_lost)"
            " SELECT inc.id, %(now)s - (random() * %(days)s) * interval '1 day', 'cli', 'job-' || g,"
            " 'bench', md5(g::text), inc.class_id,"
            " CASE WHEN g %% 10 = 0 THEN NULL ELSE inc.node_id END,"  # some diagnoses name no host
            " 0.9, '', '[]', 64, 1800000, 32.0"
            " FROM generate_series(1, %(rows)s) AS g"
            " JOIN incidents AS inc ON inc.id = 1 + (g::bigint * 7919) %% %(incidents)s",
            {**params, "rows": rows},
        )
        connection.execute(
            "UPDATE incidents SET occurrences = c.n, first_seen = c.first, last_seen = c.last FROM"
            " (SELECT incident_id, count(*) AS n, min(occurred_at) AS first, max(occurred_at) AS last"
            "  FROM occurrences GROUP BY incident_id) AS c WHERE c.incident_id = incidents.id"
        )
        for table in ("nodes", "incidents", "occurrences"):
            connection.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
            )
        connection.commit()
    visible = _vacuum(url)
    print(f"occurrences pages all-visible after VACUUM: {visible:.0%}")
    return time.perf_counter() - started


def _vacuum(url: str) -> float:
    """VACUUM until the occurrences' pages are all-visible, as on a long-lived database, so that the
    recurrence queries can be index-only scans; returns the all-visible fraction reached. Retried
    because a VACUUM right after the load may find a concurrent snapshot (autovacuum) too old."""
    visible = 0.0
    with psycopg.connect(_conninfo(url), autocommit=True) as connection:
        for _ in range(10):
            connection.execute("VACUUM (ANALYZE) nodes, incidents, occurrences")
            row = connection.execute(
                "SELECT relallvisible::float / greatest(relpages, 1) FROM pg_class"
                " WHERE relname = 'occurrences'"
            ).fetchone()
            visible = float(row[0]) if row else 0.0
            if visible > 0.99:
                break
            time.sleep(1)
    return visible


def _time(call: Callable[[], object]) -> float:
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", default=os.environ.get("NCCLBOT_TEST_POSTGRES_URL"), help="admin PostgreSQL URL"
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="occurrences to seed")
    parser.add_argument("--keep", action="store_true", help=f"keep the {BENCH_DATABASE} database afterwards")
    args = parser.parse_args()
    if not args.url or not normalise_url(args.url).startswith("postgresql"):
        print(
            "store_recurrence: give --url postgresql://... (or source .ci/services/postgres.sh)",
            file=sys.stderr,
        )
        return 2

    now = datetime.now(UTC).replace(microsecond=0)
    url = _recreate_database(normalise_url(args.url))
    with Store.open(url) as store:  # migrations create the schema and its indexes
        pass
    seconds = _seed(url, args.rows, now)
    print(f"seeded {args.rows:,} occurrences, {INCIDENTS:,} incidents, {NODES:,} nodes in {seconds:.1f} s")

    store = Store.open(url)
    try:
        with store._read() as session:
            baseline = _time(lambda: session.execute(text("SELECT 1")).scalar())
            hot_node = session.execute(
                text("SELECT node_id, class_id FROM occurrences WHERE node_id IS NOT NULL LIMIT 1")
            ).one()
            line = lambda: recurrence_line(  # noqa: E731
                session, class_id=hot_node[1], node_id=hot_node[0], hostname="bench", cluster="bench", at=now
            )
            class_line = partial(
                recurrence_line,
                session,
                class_id=hot_node[1],
                node_id=None,
                hostname=None,
                cluster="bench",
                at=now,
            )
            timings: list[tuple[str, float]] = [
                ("recurrence line (one diagnosis, on a node)", _time(line)),
                ("recurrence line (one diagnosis, no host)", _time(class_line)),
            ]
        for by in ("class", "node"):
            for days in (7, 30, 90):
                timings.append(
                    (
                        f"recurrence by {by}, {days} d vs previous",
                        _time(partial(store.recurrence, by=by, days=days, now=now)),
                    )
                )
        timings.append(("lemon nodes, 30 d", _time(lambda: store.lemon_nodes(days=30, now=now))))
        timings.append(
            (
                "GPU-hours lost by class, 30 d",
                _time(lambda: store.gpu_hours_lost(by="class", days=30, now=now)),
            )
        )
    finally:
        store.close()
        if not args.keep:
            with psycopg.connect(_conninfo(normalise_url(args.url)), autocommit=True) as connection:
                connection.execute(f'DROP DATABASE IF EXISTS "{BENCH_DATABASE}" WITH (FORCE)')

    print(f"baseline SELECT 1: {baseline * 1000:.2f} ms (median of {RUNS})")
    print(f"{'query':<44} {'median ms':>10} {'x baseline':>11}")
    slow = []
    for name, seconds in timings:
        print(f"{name:<44} {seconds * 1000:>10.1f} {seconds / baseline:>11.0f}")
        if seconds >= LIMIT_S:
            slow.append(name)
    if slow:
        print(f"over {LIMIT_S:.0f} s: {', '.join(slow)}")
        return 1
    print(f"every query under {LIMIT_S:.0f} s; slowest {max(s for _, s in timings) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
