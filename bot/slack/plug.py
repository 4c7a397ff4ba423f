"""How `ncclbot serve` mounts the Slack app: `POST /slack/events` through bolt's Flask adapter (when a
signing secret is set), Socket Mode as a background service (when SLACK_APP_TOKEN is set), and the
workers of its durable background work."""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Response, request
from slack_bolt import App
from slack_bolt.adapter.flask import SlackRequestHandler
from slack_bolt.adapter.socket_mode import SocketModeHandler

from bot.server.context import ServerContext
from bot.slack.app import build_app, build_deps

log = logging.getLogger("ncclbot.slack")

# Slack's payloads are a few kilobytes; an unsigned body is refused before it is read.
MAX_EVENT_BYTES = 1 << 20


def blueprint(app: App) -> Blueprint:
    handler = SlackRequestHandler(app)
    routes = Blueprint("slack", __name__)

    @routes.post("/slack/events")
    def slack_events() -> Response:
        if (request.content_length or 0) > MAX_EVENT_BYTES:
            return Response("payload too large", status=413)
        try:
            return handler.handle(request)
        except (ValueError, TypeError, AttributeError, KeyError) as error:
            # bolt parses the body before it checks the signature, and a body that is not one of
            # Slack's shapes (a bare JSON number, a payload that is not JSON) fails there: not Slack.
            log.warning("refused a malformed Slack request: %s", type(error).__name__)
            return Response("malformed request", status=400)

    return routes


class SocketMode:
    """The Socket Mode connection as a background service."""

    name = "slack-socket-mode"

    def __init__(self, app: App, app_token: str) -> None:
        self.handler = SocketModeHandler(app, app_token=app_token, web_client=app.client)

    def start(self) -> None:
        self.handler.connect()

    def stop(self) -> None:
        self.handler.close()


def plug(context: ServerContext) -> None:
    settings = context.settings
    if settings.slack_bot_token is None:
        log.info("Slack is off: SLACK_BOT_TOKEN is not set")
        return
    if settings.slack_signing_secret is None and settings.slack_app_token is None:
        log.warning("Slack is off: set SLACK_SIGNING_SECRET (HTTP mode) or SLACK_APP_TOKEN (Socket Mode)")
        return
    from bot.store import Store

    store: Any = Store.open(settings.database_url)
    deps = build_deps(settings, store, context.outlet)
    app = build_app(deps)
    context.add_background(deps.background)
    if settings.slack_signing_secret is not None:
        context.add_blueprint(blueprint(app))
    if settings.slack_app_token is not None:
        context.add_background(SocketMode(app, settings.slack_app_token.get_secret_value()))
