"""`ncclbot eval DIR`: top-1/top-3 accuracy, confusion and culprit agreement on a labelled corpus."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bot.evaluation import Report, evaluate


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="measure accuracy on a labelled corpus",
        description="Diagnose every case of DIR/cases.jsonl and compare with its label.",
    )
    parser.add_argument("directory", type=Path, metavar="DIR")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--verbose", "-v", action="store_true", help="list every case, not only misses")
    parser.set_defaults(handler=run)


def _percent(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100.0 * part / whole:.1f}%)" if whole else "0/0"


def run(args: argparse.Namespace) -> int:
    report = evaluate(args.directory)
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    # Piped output (CI logs, `| tail`) gets a wide table instead of rich's 80-column default.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    print_report(console, report, verbose=args.verbose)
    return 0


def print_report(console: Console, report: Report, *, verbose: bool = False) -> None:
    shown = report.cases if verbose else [c for c in report.cases if not c.top1]
    if shown:
        table = Table(title="cases" if verbose else "misses (top-1)", title_justify="left")
        for column in ("case", "label", "predicted (ranked)", "conf", "culprit"):
            table.add_column(column)
        for case in shown:
            predicted = case.error or ", ".join(case.predicted[:3])
            table.add_row(case.case_id, case.label, predicted, f"{case.confidence:.2f}", case.culprit)
        console.print(table)

    confusion = [(pair, n) for pair, n in sorted(report.confusion().items()) if pair[0] != pair[1]]
    if confusion:
        table = Table(title="confusion (label -> top-1, disagreements)", title_justify="left")
        for column in ("label", "predicted", "count"):
            table.add_column(column)
        for (label, predicted), n in confusion:
            table.add_row(label, predicted, str(n))
        console.print(table)

    culprits = report.culprit_counts()
    console.print(
        "culprit: "
        + ", ".join(f"{key} {culprits.get(key, 0)}" for key in ("agree", "wrong", "missed", "extra", "none"))
    )
    console.print(f"top-1: {_percent(report.count(lambda c: c.top1), report.total)}")
    console.print(f"top-3: {_percent(report.count(lambda c: c.top3), report.total)}")
