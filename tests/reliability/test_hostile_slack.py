"""Part A's hostile inputs through a Slack upload: each is answered in the asker's thread with a
diagnosis or a clear one-line refusal, nothing posted carries a secret, a control character or live
mrkdwn (`<!channel>`, a fake link), and the server logs no traceback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.slack_api import FakeSlack, blocks_text, eventually, wait_idle
from tests.reliability.hostile import INPUTS, Hostile, leaks, strings
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import server_env
from tests.server.helpers import RunningServer, running_server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeSlack, RunningServer]]:
    root = tmp_path_factory.mktemp("hostile-slack")
    with FakeSlack() as slack, running_server(server_env(slack, root)) as server:
        yield slack, server


@pytest.mark.parametrize("hostile", INPUTS, ids=[h.name for h in INPUTS])
def test_hostile_upload_gets_a_clear_answer_and_leaks_nothing(
    served: tuple[FakeSlack, RunningServer], hostile: Hostile
) -> None:
    slack, server = served
    channel = "CH" + hostile.name.upper().replace("-", "")[:18]
    shared = [slack.add_file(hostile.filename, hostile.make())]
    asked = slack.post_user_message(channel, "<@UBOT> what broke?", files=shared)
    reply = send.event(server.url, send.mention(channel, asked["ts"], shared))
    assert reply.status == 200 and reply.seconds < 3

    def answer() -> str:
        replies = slack.thread(channel, asked["ts"])
        shown = blocks_text(replies[0].get("blocks") or []) if replies else ""
        return "" if not shown or shown.startswith(":hourglass") else shown

    shown = eventually(answer, timeout=240)
    if hostile.diagnosed is None:
        assert shown.startswith(":warning:") and len(shown.splitlines()) == 1, shown
        assert "Internal error" not in shown
    else:
        assert f"`{hostile.diagnosed}`" in shown, shown
    wait_idle(slack, quiet=0.5, timeout=60)
    for call in (c for c in slack.calls if c.params.get("channel") == channel):
        for text, live in strings(call.params):
            assert leaks(text, mrkdwn=live) == [], (call.method, text)
    uploaded = [f.content.decode(errors="replace") for f in slack.uploads() if f.channel == channel]
    assert all(leaks(report) == [] for report in uploaded)
    log = server.log()
    assert "Traceback" not in log, log[-3000:]
