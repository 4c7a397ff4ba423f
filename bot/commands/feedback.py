"""`ncclbot feedback export DIR`: incidents people confirmed or corrected in Slack, written as labelled
cases (`cases.jsonl` + a folder of logs per case) that `ncclbot eval DIR` reads."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bot.commands.store import add_database_option, store_errors_as_usage_errors


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "feedback",
        help="export corrected diagnoses as labelled cases",
        description="Work with the feedback people gave on diagnoses (the Slack 'Wrong diagnosis' button).",
    )
    actions = parser.add_subparsers(dest="feedback_command", metavar="ACTION", required=True)
    export = actions.add_parser(
        "export",
        help="write cases.jsonl + logs in the `ncclbot eval` format",
        description="One case per incident with feedback: label = the corrected class (or the diagnosed "
        "class when confirmed); logs = the files kept with the incident.",
    )
    export.add_argument("directory", type=Path, metavar="DIR")
    add_database_option(export)
    export.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    from bot.services.bundles import export_feedback
    from bot.store import Store

    with store_errors_as_usage_errors(), Store.open(args.database_url) as store:
        summary = export_feedback(store, args.directory)
    for line in summary.skipped:
        print(f"ncclbot: skipped {line}", file=sys.stderr)
    print(f"wrote {summary.cases} case(s) to {args.directory / 'cases.jsonl'}")
    return 0
