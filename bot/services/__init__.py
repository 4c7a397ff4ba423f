"""Use cases every front end calls (CLI, Slack, webhook, digest): diagnose and record, probe, report
figures, act on incidents. Nothing here knows Slack, HTTP, argparse or the scheduler: results are plain
dataclasses, and posting goes through an injected `Outlet` (bot.services.outlet)."""
