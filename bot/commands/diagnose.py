"""`ncclbot diagnose PATH... [--json] [--no-store]`: logs in, root cause + culprit + runbook out."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from dataclasses import replace
from typing import Any

from rich.console import Console

import runbooks
from bot.render import json_text
from bot.render.diagnosis_text import render_diagnosis
from bot.render.messages import one_line
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
    # From here on the diagnosis exists: a runbook or store problem is a warning, never a lost result.
    runbook = _runbook(diagnosis)
    incident = None if args.no_store else _record(diagnosis, args, result.input_digest)

    if args.json:
        document = diagnosis.to_json()
        if runbook is not None:
            document["runbook"] = runbook.to_json()
        if incident is not None:
            document["incident"] = incident.to_json()
        json_text.dump(document, sys.stdout)
    else:
        console = Console(highlight=False, soft_wrap=False)
        render_diagnosis(
            console,
            diagnosis,
            runbook=runbook,
            recurrence=incident.recurrence_line if incident is not None else None,
        )
    return 0


def _runbook(diagnosis: Any) -> Any:
    try:
        return runbooks.render_for(diagnosis.primary.class_id, diagnosis.facts)
    except Exception as error:  # values from logs are hostile; the diagnosis must still be shown
        _warn(f"runbook not filled: {type(error).__name__}: {error}")
        return None


def _record(diagnosis: Any, args: argparse.Namespace, digest: str) -> Any:
    """Store the diagnosis. Whatever goes wrong with the database (cannot be created, unsupported driver,
    a value it refuses, a corrupt file) must not hide the diagnosis itself, so it only warns."""
    from bot.store import Store
    from bot.store.engine import database_error_reason

    try:
        with Store.open() as store:
            return store.record_diagnosis(
                diagnosis, source="cli", job_id=args.job_id, cluster=args.cluster, input_digest=digest
            )
    except Exception as error:
        _warn(f"diagnosis not stored: {database_error_reason(error)}")
        return None


def _warn(message: str) -> None:
    if os.environ.get("NCCLBOT_DEBUG"):
        traceback.print_exc()
    print(f"ncclbot: warning: {one_line(message)}", file=sys.stderr)


def _byte_size(text: str) -> int:
    units = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    suffix = value[-1:] if value[-1:] in units else ""
    number = value[: len(value) - len(suffix)]
    try:
        size = int(float(number) * units[suffix])
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (examples: 500M, 8G)") from error
    if size <= 0:
        raise argparse.ArgumentTypeError("size must be positive")
    return size
