"""Plugs the digest scheduler into `ncclbot serve` (bot.server.app.PLUGINS)."""

from __future__ import annotations

import logging

from bot.digest.scheduler import DigestScheduler
from bot.server.context import ServerContext

log = logging.getLogger("ncclbot.digest")


def plug(context: ServerContext) -> None:
    settings = context.settings
    if not settings.digest_targets():
        log.info("weekly digest off: no NCCLBOT_DIGEST_CHANNELS or NCCLBOT_DEFAULT_CHANNEL")
        return
    if settings.slack_bot_token is None:
        # Without Slack the outlet keeps messages in memory: claiming weeks would mark them posted.
        log.warning("weekly digest off: SLACK_BOT_TOKEN is not set")
        return
    context.add_background(DigestScheduler(settings, context.outlet))
