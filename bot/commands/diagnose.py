"""`ncclbot diagnose PATH... [--json] [--no-store]`: logs in, root cause + culprit + runbook out."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from rich.console import Console

import runbooks
from bot.render.diagnosis_text import render_diagnosis
from bot.render.progress import input_progress
from matcher.pipeline import diagnose
from matcher.reading.read import ReadLimits


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diagnose",
        help="diagnose the logs of a failed distributed job",
        description=(
            "Read log files, folders of per-rank logs, archives (.gz .zst .zip .tar .tgz) or stdin ('-'), "
            "and print the root cause, the rank/node that started it and what to do now."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="log file, folder, archive, or - for stdin")
    parser.add_argument("--json", action="store_true", help="print the JSON document of DESIGN.md")
    parser.add_argument("--no-store", action="store_true", help="do not record this diagnosis as an incident")
    parser.add_argument("--job-id", help="scheduler job id (makes re-runs on the same job idempotent)")
    parser.add_argument("--cluster", help="cluster name recorded with the incident")
    parser.add_argument(
        "--max-input-bytes",
        type=_byte_size,
        help="cap on decompressed input (default: $NCCLBOT_MAX_INPUT_BYTES or 64G); protects against bombs",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    limits = ReadLimits()
    if args.max_input_bytes:
        limits = replace(limits, max_input_bytes=args.max_input_bytes)
    stdin = sys.stdin.buffer if "-" in args.paths else None
    with input_progress(args.paths, enabled=not args.json) as progress:
        result = diagnose(args.paths, limits=limits, stdin=stdin, progress=progress)
    diagnosis = result.diagnosis
    runbook = runbooks.render_for(diagnosis.primary.class_id, diagnosis.facts)

    incident = None
    if not args.no_store:
        incident = _record(diagnosis, args, result.input_digest)

    if args.json:
        document = diagnosis.to_json()
        document["runbook"] = runbook.to_json()
        if incident is not None:
            document["incident"] = incident.to_json()
        json.dump(document, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        console = Console(highlight=False, soft_wrap=False)
        render_diagnosis(
            console,
            diagnosis,
            runbook=runbook,
            recurrence=incident.recurrence_line if incident is not None else None,
        )
    return 0


def _record(diagnosis: Any, args: argparse.Namespace, digest: str) -> Any:
    """Store the diagnosis; a database problem must not hide the diagnosis itself, so it only warns."""
    from sqlalchemy.exc import SQLAlchemyError

    from bot.store import Store, StoreError
    from bot.store.engine import database_error_reason

    try:
        with Store.open() as store:
            return store.record_diagnosis(
                diagnosis, source="cli", job_id=args.job_id, cluster=args.cluster, input_digest=digest
            )
    except (StoreError, SQLAlchemyError) as error:
        print(f"ncclbot: warning: diagnosis not stored: {database_error_reason(error)}", file=sys.stderr)
        return None


def _byte_size(text: str) -> int:
    units = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    suffix = value[-1:] if value[-1:] in units else ""
    number = value[: len(value) - len(suffix)]
    try:
        size = int(float(number) * units[suffix])
    except (ValueError, OverflowError) as error:  # OverflowError: "inf" parses as a float
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (examples: 500M, 8G)") from error
    if size <= 0:
        raise argparse.ArgumentTypeError("size must be positive")
    return size
