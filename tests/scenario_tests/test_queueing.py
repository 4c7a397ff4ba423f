"""With every worker busy, a new request is still acknowledged at once and its placeholder says it is
queued; it is answered when its turn comes."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.slack_api import FakeSlack, blocks_text, eventually
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import server_env
from tests.scenario_tests.flows import incident_messages
from tests.scenario_tests.logs import next_culprit, oom_log
from tests.server.helpers import running_server


def placeholders(slack: FakeSlack) -> list[str]:
    """Texts of the bot's first posts in the askers' threads."""
    return [c.params["text"] for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts")]


def test_placeholder_says_when_the_diagnosis_is_queued(tmp_path: Path) -> None:
    with FakeSlack() as slack:
        env = server_env(slack, tmp_path, NCCLBOT_DIAGNOSIS_CONCURRENCY="1")
        with running_server(env) as server:
            for channel in ("C1", "C2"):
                rank, _host = next_culprit()
                shared = [slack.add_file("train.log", oom_log(rank), delay=3.0)]  # a slow file host
                message = slack.post_user_message(channel, "<@UBOT>", files=shared)
                reply = send.event(server.url, send.mention(channel, message["ts"], shared))
                assert reply.status == 200 and reply.seconds < 3
                eventually(lambda: slack.calls_to("download"))  # the one worker is busy with C1
            first, second = eventually(lambda: placeholders(slack) if len(placeholders(slack)) == 2 else [])
            assert "queued" not in first
            assert "(queued: 1 diagnosis ahead)" in second
            for channel in ("C1", "C2"):
                [incident] = eventually(lambda c=channel: incident_messages(slack, c), timeout=60)
                assert "cuda/oom" in blocks_text(incident["blocks"])
