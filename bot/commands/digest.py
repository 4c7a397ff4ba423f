"""`ncclbot digest --preview [--json] [--chart FILE]` and `ncclbot digest --post [--channel C]`: the
weekly digest of the current ISO week, in the terminal or posted now (at most once per channel and
week; a second post that week says where the first one is and exits 0)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.commands.report import _instant
from bot.commands.store import add_database_option, store_errors_as_usage_errors


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "digest",
        help="the weekly recurrence digest: preview it here or post it to Slack now",
        description="The digest of the current ISO week: the last 7 days against the 7 before, what "
        "keeps failing, what it costs, what users corrected and which log lines nothing recognised.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--preview", action="store_true", help="print the digest (nothing is posted)")
    action.add_argument("--post", action="store_true", help="post it now, unless it was posted this week")
    parser.add_argument("--channel", metavar="C", help="Slack channel id (default: the first configured)")
    parser.add_argument("--json", action="store_true", help="with --preview: print the figures as JSON")
    parser.add_argument("--chart", metavar="FILE", type=Path, help="with --preview: write the chart (PNG)")
    parser.add_argument(
        "--as-of", type=_instant, metavar="ISO-TIME", help="the digest's moment (default now)"
    )
    add_database_option(parser)
    parser.set_defaults(handler=run)


def claimant() -> str:
    """Who claims a digest: this host and process, as the store's claim row shows it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def run(args: argparse.Namespace) -> int:
    from bot.cli import UsageError
    from bot.services.digest import build_digest, iso_week, post_digest
    from bot.settings import SettingsError, load_settings
    from bot.store import Store

    if args.post and (args.json or args.chart):
        raise UsageError("--json and --chart go with --preview")
    try:
        settings = load_settings(for_server=False)
    except SettingsError as error:
        raise UsageError(f"invalid settings: {str(error).splitlines()[0]}") from error
    targets = {t.channel: t for t in settings.digest_targets()}
    channel = args.channel or next(iter(targets), None)
    if args.post and channel is None:
        raise UsageError(
            "no channel: pass --channel or set NCCLBOT_DIGEST_CHANNELS / NCCLBOT_DEFAULT_CHANNEL"
        )
    timezone = targets[channel].slot.timezone if channel in targets else settings.digest_timezone
    now = args.as_of or datetime.now(UTC)
    week = iso_week(now, timezone)
    database_url = args.database_url or settings.database_url

    if args.preview:
        from bot.render.digest_charts import digest_chart_png
        from bot.render.digest_text import digest_text

        with store_errors_as_usage_errors(), Store.open(database_url) as store:
            figures, digest = build_digest(
                store, week=week, channel=channel, as_of=now, stale_days=settings.digest_stale_days
            )
        if args.chart:
            _write(args.chart, digest_chart_png(digest))
        if args.json:
            json.dump(figures, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            sys.stdout.write(digest_text(digest))
        return 0

    if settings.slack_bot_token is None:
        raise UsageError("SLACK_BOT_TOKEN is not set: nowhere to post (try --preview)")
    from bot.server.main import build_outlet

    outlet = build_outlet(settings)
    assert channel is not None
    with store_errors_as_usage_errors(), Store.open(database_url) as store:
        result = post_digest(
            store,
            outlet,
            channel=channel,
            week=week,
            as_of=now,
            stale_days=settings.digest_stale_days,
            claimant=claimant(),
            now=now,
        )
    where = f" (message {result.ref.ts})" if result.ref else ""
    if result.outcome == "posted":
        print(f"posted the digest {week} to {channel}{where}")
    elif result.outcome == "already-posted":
        print(f"the digest {week} was already posted to {channel}{where}; not posted again")
    else:
        print(f"another ncclbot is posting the digest {week} to {channel} right now; not posted again")
    return 0


def _write(path: Path, data: bytes) -> None:
    from bot.cli import UsageError

    try:
        path.write_bytes(data)
    except OSError as error:
        raise UsageError(f"cannot write the chart to {path}: {error.strerror or error}") from error
