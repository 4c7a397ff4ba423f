"""Run the server: settings -> outlet -> front ends -> WSGI app under waitress, until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from bot.server.app import create_app, load_plugins
from bot.server.context import ServerContext
from bot.services.file_outlet import FileOutlet
from bot.services.outlet import InMemoryOutlet, Outlet
from bot.settings import Settings

log = logging.getLogger("ncclbot.server")

# Enough request threads that 50 concurrent slash commands are all acknowledged within Slack's 3 s:
# handlers only verify, enqueue and answer; the heavy work runs in background services.
REQUEST_THREADS = 32


def build_outlet(settings: Settings) -> Outlet:
    """Slack when a bot token is configured; otherwise messages are kept in memory (and logged), so a
    webhook-only or digest-preview deployment still runs."""
    if settings.slack_bot_token is not None:
        from bot.slack.outlet import SlackOutlet  # only imported when Slack is configured

        return SlackOutlet.from_settings(settings)
    if settings.outlet_file is not None:
        log.warning("SLACK_BOT_TOKEN is not set: messages go to %s", settings.outlet_file)
        return FileOutlet(settings.outlet_file)
    log.warning("SLACK_BOT_TOKEN is not set: messages are not posted anywhere")
    return InMemoryOutlet()


def build_context(settings: Settings, outlet: Outlet | None = None) -> ServerContext:
    context = ServerContext(settings=settings, outlet=outlet or build_outlet(settings))
    load_plugins(context)
    return context


def serve(settings: Settings, *, host: str | None = None, port: int | None = None) -> None:
    import waitress

    context = build_context(settings)
    app = create_app(context)
    server = waitress.create_server(
        app,
        host=host or settings.host,
        port=port if port is not None else settings.port,
        threads=REQUEST_THREADS,
        # The largest body any route accepts: the webhook's inline logs (Slack's requests are small and
        # its files are downloaded, not posted). Waitress refuses a larger Content-Length with 413
        # before reading the body; it buffers smaller bodies before the app sees them.
        max_request_body_size=settings.webhook_max_bytes,
        ident="ncclbot",
    )
    done = threading.Event()

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        done.set()
        server.close()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    context.start_background()
    bound = server.effective_host, server.effective_port
    # The first line on stdout says where the server listens: tests and operators read it.
    print(f"ncclbot: serving on http://{bound[0]}:{bound[1]}", flush=True)
    try:
        server.run()
    except OSError:
        if not done.is_set():
            raise
    finally:
        context.stop_background()
