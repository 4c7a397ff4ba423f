"""`ncclbot serve [--host H] [--port P]`: the Slack app, the job-failure webhook, the digest scheduler
and the health/metrics endpoints in one process (settings: environment or NCCLBOT_CONFIG)."""

from __future__ import annotations

import argparse
import logging
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the Slack app, the job-failure webhook and the digest scheduler",
        description="Serve POST /slack/events, POST /webhooks/job-failed, GET /healthz, /readyz, /metrics; "
        "with SLACK_APP_TOKEN set, also connect to Slack in Socket Mode.",
    )
    parser.add_argument("--host", help="address to listen on (default: $NCCLBOT_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default: $NCCLBOT_PORT or 3000; 0 picks a free one)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from bot import logs
    from bot.cli import HeldWarnings
    from bot.commands.config import settings_or_usage_error
    from bot.commands.store import store_errors_as_usage_errors
    from bot.server.main import serve

    settings = settings_or_usage_error()
    logs.configure(settings.log_format, settings.log_level, secrets=settings.secret_values())
    # A long-running server logs as it goes instead of holding warnings until the command ends.
    logger = logging.getLogger("ncclbot")
    for handler in [h for h in logger.handlers if isinstance(h, HeldWarnings)]:
        logger.removeHandler(handler)
    logger.propagate = True
    with store_errors_as_usage_errors():
        serve(settings, host=args.host, port=args.port)
    return 0
