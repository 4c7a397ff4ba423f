"""`ncclbot` command line: one sub-command per module in bot/commands, each with `register(subparsers)`.

Exit status (DESIGN.md): 0 done (an `unknown` diagnosis included), 2 unusable input or usage
(one line on stderr, no traceback), 1 internal error.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from matcher.model import InputError

# Each module defines `register(subparsers)`, which adds its parser(s) with `set_defaults(handler=...)`;
# a handler takes the parsed namespace and returns the exit status.
COMMAND_MODULES = (
    "bot.commands.diagnose",
    "bot.commands.eval",
    "bot.commands.runbook",
    "bot.commands.store",
    "bot.commands.report",
    "bot.commands.digest",
    "bot.commands.residue",
    "bot.commands.probe",
    "bot.commands.serve",
    "bot.commands.cluster",
    "bot.commands.config",
    "bot.commands.feedback",
)


class UsageError(Exception):
    """Wrong arguments detected after parsing (exit status 2, one line)."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ncclbot")
    except PackageNotFoundError:  # running from a checkout that was not installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ncclbot",
        description="Diagnose failed distributed PyTorch / NCCL training jobs from their logs.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


class HeldWarnings(logging.Handler):
    """Holds the library's warnings (skipped files, damaged archives) until the command ends: printed
    after a result, dropped when the input is unusable, so that case stays one line on stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def flush_to_stderr(self) -> None:
        from bot.render.messages import one_line

        for message in self.messages:
            print(f"ncclbot: warning: {one_line(message)}", file=sys.stderr)
        self.messages.clear()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    held = HeldWarnings()
    logger = logging.getLogger("ncclbot")
    logger.addHandler(held)
    logger.propagate = False
    try:
        status: int = args.handler(args)
        held.flush_to_stderr()
        return status
    except (InputError, UsageError) as error:
        from bot.render.messages import one_line

        print(f"ncclbot: {one_line(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ncclbot: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # the promise is one line and status 1, not a traceback
        from bot.render.messages import one_line

        if os.environ.get("NCCLBOT_DEBUG"):
            traceback.print_exc()
        hint = "NCCLBOT_DEBUG=1 shows the traceback"
        reason = one_line(str(error))
        print(f"ncclbot: internal error: {type(error).__name__}: {reason} ({hint})", file=sys.stderr)
        return 1
    finally:
        logger.removeHandler(held)


if __name__ == "__main__":
    sys.exit(main())
