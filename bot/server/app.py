"""The WSGI application: `/healthz` here, everything else from the front ends' blueprints."""

from __future__ import annotations

import importlib
import logging

from flask import Flask, Response, jsonify

from bot.server.context import ServerContext

log = logging.getLogger("ncclbot.server")

# Front ends that plug into the server, by module; each defines `plug(context: ServerContext)`.
# A registry instead of imports, so that the server names its parts in one place and a front end
# that is not installed (or not configured) simply adds nothing.
PLUGINS: tuple[str, ...] = (
    "bot.slack.plug",
    "bot.webhook.plug",
    "bot.digest.plug",
    "bot.server.ops",
)


def load_plugins(context: ServerContext, plugins: tuple[str, ...] = PLUGINS) -> None:
    for name in plugins:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is not None and name.startswith(error.name):
                continue  # that front end is not part of this build
            raise
        module.plug(context)


def create_app(context: ServerContext) -> Flask:
    app = Flask("ncclbot")
    app.config["MAX_CONTENT_LENGTH"] = None  # each route enforces its own cap from Content-Length

    @app.get("/healthz")
    def healthz() -> Response:
        """The process is alive and serving requests (liveness)."""
        return jsonify(status="ok")

    for blueprint in context.blueprints:
        app.register_blueprint(blueprint)
    return app
