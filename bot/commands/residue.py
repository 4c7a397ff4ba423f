"""`ncclbot residue [--days N] [--json]`: the log templates nothing recognised yet, among `unknown` and
low-confidence diagnoses, with counts and example lines; `ncclbot residue --signature ID > file.toml`
drafts a signature for one of them (the format of matcher/signatures/*.toml) for a maintainer to finish."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from bot.commands.report import _instant
from bot.commands.store import add_database_option, positive_days, store_errors_as_usage_errors


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "residue",
        help="unrecognised log templates of unknown / low-confidence diagnoses; draft signatures",
        description="Error-like lines no signature matched, mined into templates (Drain3) across the "
        "stored diagnoses; most widespread first.",
    )
    parser.add_argument("--days", type=positive_days, default=7, help="period in days (default 7)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--signature", type=_template_id, metavar="ID", help="print a signature skeleton for template ID"
    )
    parser.add_argument("--as-of", type=_instant, metavar="ISO-TIME", help="end of the period (default now)")
    add_database_option(parser)
    parser.set_defaults(handler=run)


def _template_id(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"a template id is a number (see `ncclbot residue`), not {text!r}")
    return int(text)


def run(args: argparse.Namespace) -> int:
    from bot.cli import UsageError
    from bot.render.digest_text import counted
    from bot.render.safe_text import strip_controls
    from bot.render.signature_toml import signature_toml
    from bot.services.residue import list_templates, signature_skeleton
    from bot.store import Store

    with store_errors_as_usage_errors(), Store.open(args.database_url) as store:
        if args.signature is not None:
            skeleton = signature_skeleton(store, args.signature)
            if skeleton is None:
                raise UsageError(f"no residue template {args.signature} (list them with `ncclbot residue`)")
            sys.stdout.write(signature_toml(skeleton))
            return 0
        templates = list_templates(store, days=args.days, now=args.as_of or datetime.now(UTC))
    if args.json:
        json.dump({"days": args.days, "templates": [t.to_json() for t in templates]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for t in templates:
        classes = ", ".join(t.classes)
        print(
            f"[{t.id}] {counted(t.occurrences, 'diagnosis', 'diagnoses')}, {counted(t.lines, 'line')}"
            f" ({classes}): {strip_controls(t.template)}"
        )
        for example in t.examples[:3]:
            print(f"      {strip_controls(example, keep_newlines=False)}")
    print(f"{len(templates)} unrecognised template(s) in the last {args.days} days", end="")
    print("; draft a signature with `ncclbot residue --signature ID > file.toml`" if templates else "")
    return 0
