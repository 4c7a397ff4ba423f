"""One request id through a diagnosis asked for in Slack: the id of the HTTP request that carried the
event is on the access line and on the line of the queue worker that diagnosed and posted it (the
listener that queued the work ran in another thread, after the ack)."""

from __future__ import annotations

from tests.fakes.slack_api import eventually
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import SlackApp
from tests.scenario_tests.flows import incident_messages
from tests.scenario_tests.logs import next_culprit, oom_log


def test_the_events_request_id_reaches_the_worker_that_posts(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    rank, _host = next_culprit()
    shared = [slack_app.slack.add_file("train.log", oom_log(rank))]
    message = slack_app.slack.post_user_message(channel, "<@UBOT> job died", files=shared)
    event = send.mention(channel, message["ts"], shared)
    reply = send.event(slack_app.url, event, headers={"X-Request-Id": "slack-trace-1"})
    assert reply.status == 200
    eventually(lambda: incident_messages(slack_app, channel))

    def traced() -> set[str]:
        loggers = {"ncclbot.http", "ncclbot.worker"}
        found = {name for line in slack_app.server.log().splitlines() for name in loggers
                 if f" {name} [slack-trace-1]: " in line}  # fmt: skip
        return found if found == loggers else set()

    assert eventually(traced) == {"ncclbot.http", "ncclbot.worker"}
