"""`ncclbot history`, `ncclbot incidents` and `ncclbot db upgrade`: read and maintain the incident store.

The database is NCCLBOT_DATABASE_URL (or `--database-url`), else the SQLite file in the user's data
directory (bot.store.settings).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from matcher.taxonomy import CLASSES

# SQLAlchemy and the store are imported inside the handlers: every `ncclbot` start builds this parser,
# and `ncclbot diagnose --no-store` should not pay ~0.2 s for a database it never opens.

Handler = Callable[[argparse.Namespace], int]


def positive_days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--days wants a whole number of days, not {text!r}") from None
    if days <= 0:
        raise argparse.ArgumentTypeError("--days must be at least 1")
    return days


def _class_id(text: str) -> str:
    if text not in CLASSES:
        raise argparse.ArgumentTypeError(f"unknown class {text!r} (see TAXONOMY.md, e.g. cuda/oom)")
    return text


def add_database_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="database to use (default: $NCCLBOT_DATABASE_URL, else a SQLite file in the user data dir)",
    )


@contextmanager
def store_errors_as_usage_errors() -> Iterator[None]:
    """Database problems become the CLI's one-line exit-2 errors instead of tracebacks or "internal
    error" (for any command that opens the store): a corrupt or foreign SQLite file, a server that is
    down, a driver that is not installed, a data directory that cannot be created."""
    from alembic.util.exc import CommandError
    from sqlalchemy.exc import SQLAlchemyError

    from bot.cli import UsageError
    from bot.store import StoreError
    from bot.store.engine import database_error_reason

    try:
        yield
    except StoreError as error:
        raise UsageError(str(error)) from error
    except (SQLAlchemyError, CommandError, OSError, ImportError) as error:
        raise UsageError(f"cannot use the database: {database_error_reason(error)}") from error


def _print_json(document: Any) -> None:
    from bot.render import json_text

    json_text.dump(document, sys.stdout)


def _history(args: argparse.Namespace) -> int:
    from bot.render.store_text import history_lines
    from bot.store import Store

    with store_errors_as_usage_errors(), Store.open(args.database_url) as store:
        occurrences = store.history(days=args.days, node=args.node, class_id=args.class_id)
        runs = store.probe_runs(days=args.days, node=args.node) if args.class_id is None else []
    if args.json:
        _print_json(
            {
                "days": args.days,
                "node": args.node,
                "class": args.class_id,
                "occurrences": [o.to_json() for o in occurrences],
                "probe_runs": [r.to_json() for r in runs],
            }
        )
        return 0
    for line in history_lines(occurrences, runs, node=args.node, class_id=args.class_id, days=args.days):
        print(line)
    return 0


def _incidents(args: argparse.Namespace) -> int:
    from bot.render.store_text import incident_lines
    from bot.store import Store

    with store_errors_as_usage_errors(), Store.open(args.database_url) as store:
        incidents = store.incidents(open_only=args.open)
    if args.json:
        _print_json({"incidents": [i.to_json() for i in incidents]})
        return 0
    for line in incident_lines(incidents, args.open):
        print(line)
    return 0


def _db_upgrade(args: argparse.Namespace) -> int:
    from bot.store import migrate
    from bot.store.engine import create_store_engine
    from bot.store.settings import database_url

    with store_errors_as_usage_errors():
        url = database_url(args.database_url)
        engine = create_store_engine(url)
        try:
            before = migrate.current_revision(engine)
            after = migrate.upgrade(engine)
        finally:
            engine.dispose()
    shown = engine.url.render_as_string(hide_password=True)
    if before == after:
        print(f"{shown}: already at revision {after}")
    else:
        print(f"{shown}: upgraded from {before or 'an empty database'} to revision {after}")
    return 0


def register(subparsers: Any) -> None:
    history = subparsers.add_parser("history", help="stored diagnoses and probe runs, newest first")
    history.add_argument("--node", metavar="HOST", help="only this culprit node (domain ignored)")
    history.add_argument("--class", dest="class_id", type=_class_id, metavar="CLASS", help="only this class")
    history.add_argument("--days", type=positive_days, default=30, help="how far back (default 30)")
    history.add_argument("--json", action="store_true", help="print JSON")
    add_database_option(history)
    history.set_defaults(handler=_history)

    incidents = subparsers.add_parser("incidents", help="incidents (grouped diagnoses), latest first")
    incidents.add_argument("--open", action="store_true", help="only open and snoozed incidents")
    incidents.add_argument("--json", action="store_true", help="print JSON")
    add_database_option(incidents)
    incidents.set_defaults(handler=_incidents)

    db = subparsers.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    upgrade = db_commands.add_parser("upgrade", help="migrate the database to the newest schema")
    add_database_option(upgrade)
    upgrade.set_defaults(handler=_db_upgrade)
