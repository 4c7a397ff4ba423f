"""Who may press admin-only buttons when admins are a Slack user group: the group's members are looked
up over real HTTP against the fake Slack, cached, and a failed lookup neither refuses the group for the
cache's minutes nor forgets the members already known."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.settings import Settings
from bot.slack.client import make_client
from bot.slack.middleware import AdminPolicy
from tests.fakes.slack_api import FakeSlack

GROUP = "SADMINS"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.set_usergroup(GROUP, ["UMEMBER"])
        yield fake


def policy(slack: FakeSlack, retry_s: float, cache_s: float = 300) -> AdminPolicy:
    client = make_client(Settings(slack_bot_token=slack.bot_token, slack_api_url=slack.api_url))
    return AdminPolicy(client, users=["ULISTED"], groups=[GROUP], cache_s=cache_s, retry_s=retry_s)


def test_listed_users_and_group_members_are_admins_and_the_group_is_asked_once(slack: FakeSlack) -> None:
    admins = policy(slack, retry_s=60)
    assert admins.allows("ULISTED") and admins.allows("UMEMBER")
    assert not admins.allows("USTRANGER") and not admins.allows(None)
    assert len(slack.calls_to("usergroups.users.list")) == 1  # cached


def test_a_failed_lookup_is_asked_again_instead_of_refusing_the_group_for_minutes(slack: FakeSlack) -> None:
    admins = policy(slack, retry_s=0)
    slack.fail("usergroups.users.list", 400)  # not retried by the client
    assert not admins.allows("UMEMBER")  # not known yet: refused this time
    assert admins.allows("UMEMBER")  # the next press asks again and gets the answer


def test_members_already_known_stay_admins_while_slack_fails(slack: FakeSlack) -> None:
    admins = policy(slack, retry_s=0, cache_s=0)  # every press asks Slack
    assert admins.allows("UMEMBER")
    slack.fail("usergroups.users.list", 400)
    assert admins.allows("UMEMBER")
    assert not admins.allows("USTRANGER")
