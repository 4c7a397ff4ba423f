"""`ncclbot digest --post` in a process of its own, posting into a FileOutlet instead of Slack.

Usage: python -m tests.digest.post_process OUTLET_FILE START_AT CLI-ARGS...: waits until the epoch
time START_AT (so that several processes claim at the same moment), then runs the CLI."""

from __future__ import annotations

import sys
import time

import bot.server.main
from bot.cli import main
from tests.digest.outlets import FileOutlet


def run(argv: list[str]) -> int:
    outlet_file, start_at, *cli = argv
    bot.server.main.build_outlet = lambda settings: FileOutlet(outlet_file)
    time.sleep(max(0.0, float(start_at) - time.time()))
    return main(cli)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
