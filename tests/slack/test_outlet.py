"""SlackOutlet over real HTTP against the fake Slack: posts, edits, files into the thread, idempotent
posting through message metadata, and the client's retries (429 Retry-After, 5xx)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from slack_sdk.errors import SlackApiError

from bot.services.outlet import FileUpload, Message, MessageRef
from bot.settings import Settings
from bot.slack.outlet import SlackOutlet
from tests.fakes.slack_api import FakeSlack


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def outlet(slack: FakeSlack) -> SlackOutlet:
    settings = Settings(slack_bot_token=slack.bot_token, slack_api_url=slack.api_url)
    return SlackOutlet.from_settings(settings)


def test_post_and_update_reach_the_channel(slack: FakeSlack, outlet: SlackOutlet) -> None:
    block = {"type": "section", "text": {"type": "mrkdwn", "text": "first"}}
    ref = outlet.post("C1", Message(text="first", blocks=(block,)))
    outlet.update(
        ref, Message(text="second", blocks=({**block, "text": {"type": "mrkdwn", "text": "second"}},))
    )
    [message] = slack.messages("C1")
    assert message["ts"] == ref.ts and message["text"] == "second"
    assert message["blocks"][0]["text"]["text"] == "second"
    assert slack.calls_to("chat.postMessage")[0].token == slack.bot_token


def test_files_go_into_the_thread_through_the_three_step_upload(
    slack: FakeSlack, outlet: SlackOutlet
) -> None:
    parent = outlet.post("C1", Message(text="incident"))
    report = FileUpload(filename="report.txt", content=b"full report\n" * 100, title="Full report")
    outlet.post("C1", Message(text="details", files=(report,)), thread=parent)
    assert [c.method for c in slack.calls if "files" in c.method or c.method == "upload"] == [
        "files.getUploadURLExternal",
        "upload",
        "files.completeUploadExternal",
    ]
    [uploaded] = slack.uploads()
    assert (uploaded.channel, uploaded.thread_ts, uploaded.content) == ("C1", parent.ts, report.content)


def test_post_with_a_known_key_returns_the_earlier_message(slack: FakeSlack, outlet: SlackOutlet) -> None:
    first = outlet.post("C1", Message(text="incident #7"), key="incident:7")
    again = outlet.post("C1", Message(text="incident #7"), key="incident:7")
    other = outlet.post("C1", Message(text="incident #8"), key="incident:8")
    assert again == first and other != first
    assert len(slack.calls_to("chat.postMessage")) == 2
    assert slack.messages("C1")[0]["metadata"]["event_payload"] == {"key": "incident:7"}


def test_keyed_reply_is_found_in_its_thread(slack: FakeSlack, outlet: SlackOutlet) -> None:
    parent = outlet.post("C1", Message(text="incident"))
    first = outlet.post("C1", Message(text="details"), thread=parent, key="details:1")
    assert outlet.post("C1", Message(text="details"), thread=parent, key="details:1") == first
    assert slack.calls_to("conversations.replies")


def test_rate_limit_waits_for_retry_after(slack: FakeSlack, outlet: SlackOutlet) -> None:
    slack.fail("chat.postMessage", 429, retry_after=1)
    ref = outlet.post("C1", Message(text="hello"))
    first, second = slack.calls_to("chat.postMessage")
    assert second.at - first.at >= 1.0
    assert slack.messages("C1")[0]["ts"] == ref.ts


def test_server_errors_are_retried_with_backoff(slack: FakeSlack, outlet: SlackOutlet) -> None:
    slack.fail("chat.update", 502, times=2)
    ref = outlet.post("C1", Message(text="a"))
    outlet.update(ref, Message(text="b"))
    assert len(slack.calls_to("chat.update")) == 3
    assert slack.messages("C1")[0]["text"] == "b"


def test_an_outage_longer_than_the_retries_raises(slack: FakeSlack, outlet: SlackOutlet) -> None:
    slack.fail("chat.postMessage", 503, times=10)
    started = time.monotonic()
    with pytest.raises(SlackApiError):
        outlet.post("C1", Message(text="lost?"))
    assert len(slack.calls_to("chat.postMessage")) == 4  # the call and three retries
    assert time.monotonic() - started < 30


def test_lookup_failure_does_not_block_posting(slack: FakeSlack, outlet: SlackOutlet) -> None:
    slack.fail("conversations.history", 500, times=10)
    ref = outlet.post("C1", Message(text="posted anyway"), key="incident:9")
    assert slack.messages("C1")[0]["ts"] == ref.ts
    assert isinstance(ref, MessageRef)
