"""`ncclbot runbook CLASS [--json] [--set FIELD=VALUE ...]` and `ncclbot runbook --list`."""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any

import runbooks
from bot.cli import UsageError
from bot.render import json_text, runbook_text
from matcher.model import FieldValue
from runbooks.values import DERIVED_FIELDS, PLACEHOLDER_FIELDS


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "runbook",
        help="show what to do for a root-cause class",
        description="Show the runbook of a root-cause class: summaries, steps, verification, dead ends, "
        "prevention and references. --set fills it with values as a diagnosis would.",
    )
    parser.add_argument("class_id", nargs="?", metavar="CLASS", help="class id, e.g. hardware/gpu-xid")
    parser.add_argument("--json", action="store_true", help="print the runbook as JSON")
    parser.add_argument("--list", action="store_true", help="list the classes that have a runbook")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a diagnosis value to fill in (repeatable), e.g. --set culprit_host=gpu-node-017",
    )
    parser.add_argument("--width", type=int, default=None, help="text width (default: terminal, max 100)")
    parser.add_argument(
        "--brief",
        action="store_true",
        help="only the summaries, steps and verification (as diagnose shows them)",
    )
    parser.set_defaults(handler=run)


def _values(assignments: list[str]) -> dict[str, FieldValue]:
    settable = sorted(PLACEHOLDER_FIELDS - DERIVED_FIELDS)
    values: dict[str, FieldValue] = {}
    for assignment in assignments:
        name, equals, value = assignment.partition("=")
        if not equals or not name:
            raise UsageError(f"--set expects FIELD=VALUE, got {assignment!r}")
        if name not in settable:
            raise UsageError(f"--set: unknown field {name!r} (known: {', '.join(settable)})")
        values[name] = value  # kept as text: "017" must stay "017"; numbers are parsed where needed
    return values


def run(args: argparse.Namespace) -> int:
    if args.list:
        for class_id, runbook in sorted(runbooks.load_all().items()):
            print(f"{class_id:32} {runbook.title}")
        return 0
    if not args.class_id:
        raise UsageError("runbook: give a CLASS (or --list to see them)")
    rendered = runbooks.render_for(args.class_id, _values(args.set))
    if args.json:
        json_text.dump(rendered.to_json(), sys.stdout)
        return 0
    width = args.width or min(shutil.get_terminal_size((80, 24)).columns, 100)
    sys.stdout.write(runbook_text.render(rendered, width=width, brief=args.brief))
    return 0
