"""The bolt App, wired: signature verification (bolt's RequestVerification), the repeated-event filter,
and the listeners of every surface."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import App, BoltResponse

from bot.logs import ContextThreadPoolExecutor
from bot.services.bundles import bundle_root
from bot.services.hooks import cluster_actions, job_sources
from bot.services.incidents import IncidentActions
from bot.services.outlet import Outlet
from bot.settings import Settings
from bot.slack.client import make_client
from bot.slack.deps import SlackDeps
from bot.slack.files import Downloader
from bot.slack.listeners import actions, commands, events, home, shortcuts, views
from bot.slack.middleware import (
    DATABASE_DOWN,
    AdminPolicy,
    drop_repeated_events,
    refuse_replays,
    unavailable,
)
from bot.slack.outlet import SlackOutlet
from bot.slack.work import Diagnoser

log = logging.getLogger("ncclbot.slack")

# Listener threads: they acknowledge, post a placeholder and queue; heavy work runs in the Runner.
LISTENER_THREADS = 16
SURFACES = (commands, events, shortcuts, actions, views, home)


def build_deps(settings: Settings, store: object, outlet: Outlet | None = None) -> SlackDeps:
    client = outlet.client if isinstance(outlet, SlackOutlet) else make_client(settings)
    outlet = outlet if isinstance(outlet, SlackOutlet) else SlackOutlet(client)
    cluster = cluster_actions(settings)
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else ""
    downloader = Downloader(
        client,
        token=token,
        api_url=settings.slack_api_url,
        cap=settings.max_upload_bytes,
        spool_dir=settings.spool_dir,
    )
    diagnoser = Diagnoser(
        settings=settings,
        outlet=outlet,
        store=store,
        downloader=downloader,
        bundle_root=bundle_root(settings),
    )
    return SlackDeps(
        settings=settings,
        client=client,
        outlet=outlet,
        store=store,
        diagnoser=diagnoser,
        actions=IncidentActions(store=store, outlet=outlet, cluster=cluster),
        policy=AdminPolicy(client, settings.admin_users, settings.admin_groups),
        jobs=job_sources(settings),
    )


def build_app(deps: SlackDeps, *, listener_executor: Any = None) -> App:
    secret = deps.settings.slack_signing_secret
    app = App(
        name="ncclbot",
        client=deps.client,
        signing_secret=secret.get_secret_value() if secret else "",
        # Verified on the first request instead of at start: a Slack outage must not stop the server.
        token_verification_enabled=False,
        # Listeners run after the ack, in these threads: the copied context keeps the request id, so the
        # work they queue is logged under the id of the Slack request that asked for it.
        listener_executor=listener_executor
        or ContextThreadPoolExecutor(LISTENER_THREADS, thread_name_prefix="slack-listener"),
    )
    app.middleware(refuse_replays(deps.store, deps.client))
    app.middleware(drop_repeated_events(deps.store, deps.client, queued=events.brings_logs))
    for surface in SURFACES:
        surface.register(app, deps)

    @app.error
    def database_down(
        error: Exception, body: dict[str, Any], response: BoltResponse | None
    ) -> BoltResponse | None:
        """A listener that could not reach the database answers like the intake does (see middleware)."""
        if isinstance(error, DATABASE_DOWN) and response is not None:
            log.warning("database unavailable while answering Slack: %s", type(error).__name__)
            return unavailable(body, deps.client)
        log.error("Slack listener failed: %s: %s", type(error).__name__, error, exc_info=error)
        return None

    return app
