"""A database outage under a running bot: PostgreSQL is stopped mid-run and started again, without
restarting the bot. While it is down nothing can be committed, so nothing is taken: a slash command is
answered "try again in a minute" (ephemeral), a button press the same as an ephemeral message, a Slack
event 503 (Slack delivers it again later), a job-failure webhook 503 (not 202: its sender retries); a
diagnosis that was under way when the database went away, and a webhook accepted just before, are
retried, not posted without their incident and not lost. Once it is back, all of them are answered once."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import need_service
from tests.fakes.slack_api import FakeSlack, blocks_text, eventually, wait_idle
from tests.fixtures.postgres_server import PostgresServer, postgres_bin, private_postgres
from tests.reliability.webhooks import job_event, posts_per_job, webhook_env
from tests.reliability.webhooks import send as send_webhook
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import ADMIN, server_env
from tests.scenario_tests.flows import buttons, incident_messages
from tests.scenario_tests.logs import next_culprit, oom_log
from tests.server.helpers import running_server

UNAVAILABLE = "database is unavailable"


@pytest.fixture
def postgres() -> Any:
    need_service(postgres_bin() is not None, "PostgreSQL binaries (source .ci/services/postgres.sh)")
    with private_postgres() as server:
        yield server


def answered(slack: FakeSlack, channel: str, asked: dict[str, Any]) -> str:
    replies = slack.thread(channel, asked["ts"])
    shown = blocks_text(replies[0].get("blocks") or []) if replies else ""
    return shown if "cuda/oom" in shown else ""


def test_slack_requests_while_the_database_is_down_and_after(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    with FakeSlack() as slack:
        env = {
            **webhook_env(slack, postgres.url),
            **server_env(slack, tmp_path, NCCLBOT_DATABASE_URL=postgres.url, NCCLBOT_WORK_LEASE_S="3"),
        }
        with running_server(env) as server:
            rank, _host = next_culprit()
            shared = [slack.add_file("train.log", oom_log(rank))]
            before = slack.post_user_message("CDB1", "<@UBOT>", files=shared)
            assert send.event(server.url, send.mention("CDB1", before["ts"], shared)).status == 200
            [incident] = eventually(lambda: incident_messages(slack, "CDB1"), timeout=60)

            # A diagnosis under way (its file host is slow) when the database goes away.
            rank2, host2 = next_culprit()
            slow = [slack.add_file("train.log", oom_log(rank2), delay=2.0)]
            during = slack.post_user_message("CDB2", "<@UBOT>", files=slow)
            assert send.event(server.url, send.mention("CDB2", during["ts"], slow)).status == 200
            eventually(lambda: slack.calls_to("download"), timeout=30)
            assert send_webhook(server.url, job_event("5001")).status == 202  # accepted: must not be lost
            postgres.stop()
            refused_webhook = send_webhook(server.url, job_event("5002"))
            assert refused_webhook.status == 503, refused_webhook  # not 202: nothing could be committed
            assert refused_webhook.body["error"].startswith(
                "the database is unavailable, nothing was accepted"
            )

            command = send.command(server.url, "status", channel="CDB1")
            assert command.status == 200 and UNAVAILABLE in command.shown()
            rank3, host3 = next_culprit()
            late = [slack.add_file("train.log", oom_log(rank3))]
            asked = slack.post_user_message("CDB3", "<@UBOT>", files=late)
            event = send.event_envelope(send.mention("CDB3", asked["ts"], late))
            refused = send.post(server.url, json.dumps(event).encode(), "application/json")
            assert refused.status == 503  # not taken: Slack will deliver it again
            press = send.block_action(
                "incident.resolve",
                json.loads(buttons(incident)["incident.resolve"]["value"]),
                channel="CDB1",
                message_ts=incident["ts"],
                user=ADMIN,
            )
            assert send.interaction(server.url, press).status == 200
            told = eventually(
                lambda: [c for c in slack.calls_to("chat.postEphemeral") if UNAVAILABLE in c.params["text"]]
            )
            assert told[0].params["user"] == ADMIN
            wait_idle(slack, quiet=3.0, timeout=60)
            assert not answered(slack, "CDB2", during)  # not posted without its incident

            postgres.start()
            deadline = time.monotonic() + 60
            while (again := send_webhook(server.url, job_event("5002"))).status == 503:  # the sender retries
                assert time.monotonic() < deadline, again
                time.sleep(0.5)
            assert again.status == 202
            # Slack's redelivery of the refused event (same event id, signed anew), and a new command.
            assert send.post(server.url, json.dumps(event).encode(), "application/json").status == 200
            assert host3 in eventually(lambda: answered(slack, "CDB3", asked), timeout=90)
            assert host2 in eventually(lambda: answered(slack, "CDB2", during), timeout=90)
            assert UNAVAILABLE not in send.command(server.url, "status", channel="CDB1").shown()
            assert send.interaction(server.url, {**press, "trigger_id": send.trigger_id()}).status == 200
            eventually(lambda: "resolved by" in blocks_text(incident_messages(slack, "CDB1")[0]["blocks"]))
            eventually(lambda: posts_per_job(slack) == Counter({"5001": 1, "5002": 1}), timeout=120)
        # Each answered once.
        for channel, message in (("CDB2", during), ("CDB3", asked)):
            assert len(slack.thread(channel, message["ts"])) == 1
            assert len(incident_messages(slack, channel)) == 1
