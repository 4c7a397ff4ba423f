"""The digest plugs into `ncclbot serve` as a background service only when it has somewhere to post."""

from __future__ import annotations

import pytest

from bot.digest.plug import plug
from bot.digest.scheduler import DigestScheduler
from bot.server.app import PLUGINS
from bot.server.context import ServerContext
from bot.services.outlet import InMemoryOutlet
from bot.settings import load_settings


def context(**settings: object) -> ServerContext:
    return ServerContext(settings=load_settings(for_server=False, **settings), outlet=InMemoryOutlet())


def test_the_server_loads_the_digest_plug() -> None:
    assert "bot.digest.plug" in PLUGINS


def test_a_configured_channel_and_slack_give_a_scheduler(sqlite_url: str) -> None:
    server = context(digest_channels="C0TEAM", slack_bot_token="xoxb-test", database_url=sqlite_url)
    plug(server)
    [service] = server.background
    assert isinstance(service, DigestScheduler)
    assert [t.channel for t in service.targets] == ["C0TEAM"]
    service.start()
    try:
        assert service.next_run("C0TEAM") is not None and service.next_run("C0TEAM").weekday() == 0
    finally:
        service.stop()


@pytest.mark.parametrize(
    "settings",
    [
        {"slack_bot_token": "xoxb-test"},  # no channel
        {"digest_channels": "C0TEAM"},  # no Slack: posting would only mark weeks done
    ],
)
def test_without_a_channel_or_slack_there_is_no_scheduler(settings: dict[str, object]) -> None:
    server = context(**settings)
    plug(server)
    assert server.background == []
