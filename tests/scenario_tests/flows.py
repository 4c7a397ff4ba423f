"""Steps several scenario tests share: post a log with a mention, find the incident's message."""

from __future__ import annotations

from typing import Any

from tests.fakes.slack_api import FakeSlack, eventually
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import SlackApp
from tests.scenario_tests.logs import next_culprit, oom_log


def incident_messages(slack_app: SlackApp | FakeSlack, channel: str) -> list[dict[str, Any]]:
    """The bot's top-level messages with incident buttons in `channel`."""
    slack = slack_app if isinstance(slack_app, FakeSlack) else slack_app.slack
    top = [m for m in slack.bot_messages(channel) if m.get("thread_ts") in (None, m["ts"])]
    return [m for m in top if any(b.get("type") == "actions" for b in m.get("blocks", []))]


def mention_with(
    slack_app: SlackApp, channel: str, files: dict[str, bytes], **kw: Any
) -> tuple[dict[str, Any], send.Reply]:
    shared = [slack_app.slack.add_file(name, content) for name, content in files.items()]
    message = slack_app.slack.post_user_message(channel, "<@UBOT> job died", files=shared)
    reply = send.event(slack_app.url, send.mention(channel, message["ts"], shared, **kw))
    return message, reply


def new_incident(slack_app: SlackApp) -> tuple[str, dict[str, Any], str]:
    """A fresh cuda/oom incident in a channel of its own: (channel, its message, culprit host)."""
    channel = slack_app.channel()
    rank, host = next_culprit()
    mention_with(slack_app, channel, {"train.log": oom_log(rank)})
    [message] = eventually(lambda: incident_messages(slack_app, channel))
    return channel, message, host


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """action_id -> button of an incident message."""
    found = {}
    for block in message.get("blocks", []):
        if block.get("type") == "actions":
            for element in block["elements"]:
                found[element["action_id"]] = element
    return found
