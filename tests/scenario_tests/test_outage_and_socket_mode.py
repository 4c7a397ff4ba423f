"""A Slack outage delays the answer but loses nothing; Socket Mode (no public URL) works like HTTP."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.slack_api import FakeSlack, blocks_text, eventually
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import server_env
from tests.scenario_tests.logs import next_culprit, oom_log
from tests.server.helpers import running_server


def test_slack_outage_delays_the_diagnosis_but_loses_nothing(tmp_path: Path) -> None:
    rank, host = next_culprit()
    with FakeSlack() as slack:
        env = server_env(slack, tmp_path)
        with running_server(env) as server:
            shared = [slack.add_file("train.log", oom_log(rank))]
            message = slack.post_user_message("C1", "<@UBOT>", files=shared)
            # 503 to the placeholder and its three retries, to the result's first publication (four calls),
            # and to the second's first call: the client's retries alone would have given up.
            slack.fail("chat.postMessage", 503, times=9)
            assert send.event(server.url, send.mention("C1", message["ts"], shared)).status == 200

            def incident() -> list[dict]:
                return [
                    m for m in slack.top_level("C1") if m.get("bot_id") and "cuda/oom" in m.get("text", "")
                ]

            [posted] = eventually(incident, timeout=60)
            assert host in blocks_text(posted["blocks"])
            assert len(slack.calls_to("chat.postMessage")) >= 7  # 6 refused, then the incident got through
            assert (
                "Traceback" not in server.log().split("serving on", 1)[-1]
                or "publishing failed" in server.log()
            )


def test_socket_mode_command_and_mention_are_answered(tmp_path: Path) -> None:
    rank, host = next_culprit()
    with FakeSlack() as slack:
        env = server_env(slack, tmp_path, SLACK_APP_TOKEN=slack.app_token)
        del env["SLACK_SIGNING_SECRET"]  # Socket Mode needs no signing secret and no public URL
        with running_server(env) as server:
            socket = slack.socket_mode()
            eventually(lambda: socket.connected, timeout=30)
            assert [c.token for c in slack.calls_to("apps.connections.open")] == [slack.app_token]

            command = {
                "command": "/nccl",
                "text": "help",
                "channel_id": "C9",
                "user_id": "U1",
                "trigger_id": "1.2.3",
                "response_url": slack.response_url("socket-help"),
                "team_id": "T0FAKE",
            }
            envelope = socket.send("slash_commands", command)
            ack = eventually(lambda: socket.ack_for(envelope), timeout=10)
            assert "/nccl diagnose" in blocks_text(ack["payload"]["blocks"])

            shared = [slack.add_file("train.log", oom_log(rank))]
            message = slack.post_user_message("C9", "<@UBOT>", files=shared)
            event = send.event_envelope(send.mention("C9", message["ts"], shared))
            first = socket.send("events_api", event)
            socket.send("events_api", event, retry_attempt=1)  # a retried delivery: dropped
            eventually(lambda: socket.ack_for(first), timeout=10)

            def incident() -> list[dict]:
                return [
                    m for m in slack.top_level("C9") if m.get("bot_id") and "cuda/oom" in m.get("text", "")
                ]

            [posted] = eventually(incident, timeout=60)
            assert host in blocks_text(posted["blocks"])
            placeholders = [
                c for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts") == message["ts"]
            ]
            assert len(placeholders) == 1
            # No HTTP route without a signing secret.
            assert send.command(server.url, "help", channel="C9").status == 404


def test_accepted_diagnosis_survives_a_crash_of_the_server(tmp_path: Path) -> None:
    """kill -9 while the log is still downloading; the restarted server takes the queued task over."""
    rank, host = next_culprit()
    with FakeSlack() as slack:
        env = server_env(slack, tmp_path, NCCLBOT_WORK_LEASE_S="2")
        shared = [slack.add_file("train.log", oom_log(rank), delay=4.0)]
        message = slack.post_user_message("C1", "<@UBOT>", files=shared)
        with running_server(env) as first:
            assert send.event(first.url, send.mention("C1", message["ts"], shared)).status == 200
            eventually(lambda: slack.calls_to("download"), timeout=20)  # the worker is on it
            first.process.kill()  # SIGKILL: no clean shutdown
            first.process.wait(timeout=10)
        assert not [m for m in slack.top_level("C1") if m.get("bot_id")]  # nothing posted yet
        with running_server(env):

            def incident() -> list[dict]:
                return [
                    m for m in slack.top_level("C1") if m.get("bot_id") and "cuda/oom" in m.get("text", "")
                ]

            [posted] = eventually(incident, timeout=60)
            assert host in blocks_text(posted["blocks"])
        # The placeholder the first server posted was edited by the second: one answer, not two.
        [placeholder] = slack.thread("C1", message["ts"])
        assert "cuda/oom" in blocks_text(placeholder["blocks"])
        assert len(incident()) == 1
