"""`ncclbot serve [--host H] [--port P]`: the Slack app, the job-failure webhook, the digest scheduler
and the health/metrics endpoints in one process (settings: environment or NCCLBOT_CONFIG)."""

from __future__ import annotations

import argparse
import logging
import sys
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
    from bot.cli import HeldWarnings, UsageError
    from bot.server.main import serve
    from bot.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as error:
        for line in str(error).splitlines():
            print(f"ncclbot: setting {line}", file=sys.stderr)
        raise UsageError("invalid settings (see above)") from error
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # A long-running server logs as it goes instead of holding warnings until the command ends.
    logger = logging.getLogger("ncclbot")
    for handler in [h for h in logger.handlers if isinstance(h, HeldWarnings)]:
        logger.removeHandler(handler)
    logger.propagate = True
    serve(settings, host=args.host, port=args.port)
    return 0
