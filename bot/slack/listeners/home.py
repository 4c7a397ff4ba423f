"""The App Home tab: open incidents, lemon nodes, last week's figures."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient

from bot.render import slack_views
from bot.services.report import collect
from bot.slack.deps import SlackDeps

HOME_DAYS = 7


def register(app: App, deps: SlackDeps) -> None:
    @app.event("app_home_opened")
    def home_opened(event: dict[str, Any], client: WebClient) -> None:
        if event.get("tab") not in (None, "home"):
            return
        now = datetime.now(UTC)
        view = slack_views.home_view(
            incidents=deps.store.incidents(open_only=True, limit=50),
            lemons=deps.store.lemon_nodes(days=30, now=now),
            figures=collect(deps.store, days=HOME_DAYS, now=now),
        )
        client.views_publish(user_id=str(event.get("user")), view=view)
