"""`ncclbot diagnose PATH... [--json] [--no-store]`: logs in, root cause + culprit + runbook out."""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from bot.cli import UsageError
from bot.jobs.model import JobError, JobRef
from bot.render import json_text
from bot.render.diagnosis_text import render_diagnosis
from bot.render.progress import input_progress
from bot.services.diagnose import DiagnosisRequest, diagnose_and_record
from bot.services.job_logs import fetch_job_logs
from bot.settings import SettingsError, load_settings
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
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="log file, folder, archive, or - for stdin; none with --job-id: fetch the job's logs",
    )
    parser.add_argument("--json", action="store_true", help="print the JSON document of DESIGN.md")
    parser.add_argument("--no-store", action="store_true", help="do not record this diagnosis as an incident")
    parser.add_argument(
        "--job-id",
        help="scheduler job id (makes re-runs idempotent); without PATH the logs come from the job source",
    )
    parser.add_argument("--cluster", help="cluster name recorded with the incident (and its job source)")
    parser.add_argument(
        "--max-input-bytes",
        type=_byte_size,
        help="cap on decompressed input (default: $NCCLBOT_MAX_INPUT_BYTES or 64G); protects against bombs",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.paths:
        return _diagnose(args, args.paths)
    if not args.job_id:
        raise UsageError("give log PATHs, or --job-id to fetch a job's logs through its job source")
    with tempfile.TemporaryDirectory(prefix="ncclbot-job-") as scratch:
        try:
            settings = load_settings(for_server=False)
            fetched = fetch_job_logs(settings, JobRef(args.job_id, args.cluster), Path(scratch))
        except (JobError, SettingsError) as error:
            raise UsageError(str(error)) from None
        for note in fetched.info.notes:
            print(f"ncclbot: note: {note}", file=sys.stderr)
        return _diagnose(args, [str(path) for path in fetched.paths])


def _diagnose(args: argparse.Namespace, paths: list[str]) -> int:
    limits = ReadLimits()
    if args.max_input_bytes:
        limits = replace(limits, max_input_bytes=args.max_input_bytes)
    stdin = sys.stdin.buffer if "-" in paths else None
    with input_progress(paths, enabled=not args.json) as progress:
        outcome = diagnose_and_record(
            DiagnosisRequest(
                paths=paths,
                source="cli",
                job_id=args.job_id,
                cluster=args.cluster,
                store=not args.no_store,
                limits=limits,
                stdin=stdin,
                progress=progress,
            )
        )
    if args.json:
        json_text.dump(outcome.to_json(), sys.stdout)
    else:
        console = Console(highlight=False, soft_wrap=False)
        render_diagnosis(
            console,
            outcome.diagnosis,
            runbook=outcome.runbook,
            recurrence=outcome.incident.recurrence_line if outcome.incident is not None else None,
        )
    return 0


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
