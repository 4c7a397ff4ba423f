"""`ncclbot report [--days N] [--json]`: what keeps happening and what it costs, from the incident store.

Recurrence per class and per node against the previous period, lemon nodes, GPU-hours lost, time to
resolve and whether fixes held. The weekly digest will post the same figures.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bot.commands.store import add_database_option, positive_days, store_errors_as_usage_errors
from bot.render import json_text
from bot.render.messages import field
from bot.services.report import collect


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="recurrence, lemon nodes, GPU-hours lost, time to resolve, fix effectiveness",
        description="Figures over the last N days from the incident store, each against the N days before.",
    )
    parser.add_argument("--days", type=positive_days, default=7, help="period length in days (default 7)")
    parser.add_argument("--as-of", type=_instant, metavar="ISO-TIME", help="end of the period (default now)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_database_option(parser)
    parser.set_defaults(handler=run)


def _instant(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not an ISO time: {text!r} (example: 2026-11-29T12:00)") from error
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def run(args: argparse.Namespace) -> int:
    from bot.store import Store

    now = args.as_of or datetime.now(UTC)
    with store_errors_as_usage_errors(), Store.open(args.database_url) as store:
        report = collect(store, days=args.days, now=now)
    if args.json:
        json_text.dump(report, sys.stdout)
    else:
        print_report(Console(highlight=False, width=None if sys.stdout.isatty() else 120), report)
    return 0


def _table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    """Cells are plain `Text`, never markup: a node named `[link=https://...]` in the store stays text."""
    table = Table(title=Text(title), title_justify="left")
    for column in columns:
        table.add_column(Text(column))
    for row in rows:
        table.add_row(*(Text(field(cell)) for cell in row))
    return table


def print_report(console: Console, report: dict[str, Any]) -> None:
    days = report["days"]
    console.print(Text(f"Last {days} day(s) up to {report['as_of']}, against the {days} day(s) before"))
    for key, label in (("recurrence_by_class", "class"), ("recurrence_by_node", "node")):
        rows = [[r["key"], str(r["count"]), str(r["previous"]), r["trend"]] for r in report[key]]
        console.print(_table(f"recurrence by {label}", [label, "now", "before", "trend"], rows))
    lemons = [
        [n["hostname"], f"{n['score']:.1f}", str(n["incidents"]), f"{n['failed_probes']}/{n['probe_runs']}"]
        for n in report["lemon_nodes"]
    ]
    console.print(
        _table("lemon nodes (worst first)", ["node", "score", "incidents", "failed probes"], lemons)
    )
    cost = [
        [r["key"], f"{r['gpu_hours']:.1f}", f"{r['estimated']}/{r['occurrences']}"]
        for r in report["gpu_hours_lost_by_class"]
    ]
    console.print(_table("GPU-hours lost", ["class", "GPU-h", "estimated/occurrences"], cost))
    mttr = [[r["key"], str(r["resolved"]), f"{r['median_hours']:.1f} h"] for r in report["mttr"]]
    console.print(_table("time to resolve", ["class", "resolved", "median"], mttr))
    fixes = [
        [f["fix"], str(f["held"]), str(f["recurred"]), str(f["pending"])] for f in report["fix_effectiveness"]
    ]
    console.print(_table("fix effectiveness (14 days)", ["fix", "held", "recurred", "pending"], fixes))
