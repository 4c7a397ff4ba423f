"""Shared files that cannot be read get a clear reply, never a traceback; the message shortcut and the
App Home tab."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

from tests.fakes.slack_api import FakeSlack, blocks_text, eventually
from tests.scenario_tests import slack_requests as send
from tests.scenario_tests.conftest import SlackApp, server_env
from tests.scenario_tests.flows import incident_messages, new_incident
from tests.scenario_tests.logs import next_culprit, oom_log
from tests.server.helpers import running_server


def _answer(slack_app: SlackApp, channel: str, ts: str) -> str:
    """The final text of the bot's reply in the thread of `ts` (the placeholder, edited)."""

    def edited() -> str:
        replies = slack_app.slack.thread(channel, ts)
        shown = blocks_text(replies[0]["blocks"]) if replies else ""
        return shown if replies and "Reading" not in shown else ""

    return eventually(edited, timeout=30)


def _mention_file(slack_app: SlackApp, name: str, content: bytes, **file_kw: object) -> tuple[str, str]:
    channel = slack_app.channel()
    shared = [slack_app.slack.add_file(name, content, **file_kw)]  # type: ignore[arg-type]
    message = slack_app.slack.post_user_message(channel, "<@UBOT>", files=shared)
    assert send.event(slack_app.url, send.mention(channel, message["ts"], shared)).status == 200
    return channel, message["ts"]


def test_login_page_instead_of_the_file_gets_a_clear_reply(slack_app: SlackApp) -> None:
    channel, ts = _mention_file(slack_app, "train.log", b"irrelevant", login_page=True)
    answer = _answer(slack_app, channel, ts)
    assert "sign-in page" in answer and "files:read" in answer
    assert "Traceback" not in answer


def test_image_is_not_a_log(slack_app: SlackApp) -> None:
    channel, ts = _mention_file(
        slack_app, "screenshot.png", b"\x89PNG....", mimetype="image/png", filetype="png"
    )
    answer = _answer(slack_app, channel, ts)
    assert "screenshot.png" in answer and "not a log" in answer
    assert not [c for c in slack_app.slack.calls_to("download") if "screenshot" in c.method]


def test_binary_file_gets_the_matchers_one_line_reason(slack_app: SlackApp) -> None:
    channel, ts = _mention_file(
        slack_app,
        "core.dump",
        bytes(range(256)) * 4096,
        mimetype="application/octet-stream",
        filetype="binary",
    )
    answer = _answer(slack_app, channel, ts)
    assert ":warning:" in answer and "binary" in answer.lower()


def test_file_over_the_cap_is_refused_before_download(tmp_path: Path) -> None:
    with (
        FakeSlack() as slack,
        running_server(server_env(slack, tmp_path, NCCLBOT_MAX_UPLOAD_BYTES="1000")) as server,
    ):
        shared = [slack.add_file("train.log", b"x" * 5000)]
        message = slack.post_user_message("C1", "<@UBOT>", files=shared)
        assert send.event(server.url, send.mention("C1", message["ts"], shared)).status == 200

        def answer() -> str:
            replies = slack.thread("C1", message["ts"])
            shown = blocks_text(replies[0]["blocks"]) if replies else ""
            return shown if "cap" in shown else ""

        assert "train.log is 5.0 KB, over this bot's cap of 1.0 KB" in eventually(answer)
        assert slack.calls_to("download") == []


def test_compressed_archive_of_rank_logs_is_diagnosed(slack_app: SlackApp) -> None:
    rank, host = next_culprit()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = oom_log(rank)
        info = tarfile.TarInfo("job-771204/train.log")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    channel, _ts = _mention_file(
        slack_app, "job-771204.tar.gz", buffer.getvalue(), mimetype="application/gzip", filetype="gzip"
    )
    [message] = eventually(lambda: incident_messages(slack_app, channel))
    assert host in blocks_text(message["blocks"])


def test_gzipped_log_is_diagnosed(slack_app: SlackApp) -> None:
    rank, host = next_culprit()
    channel, _ts = _mention_file(
        slack_app, "train.log.gz", gzip.compress(oom_log(rank)), mimetype="application/gzip", filetype="gzip"
    )
    [message] = eventually(lambda: incident_messages(slack_app, channel))
    assert "cuda/oom" in blocks_text(message["blocks"]) and host in blocks_text(message["blocks"])


def test_message_shortcut_diagnoses_the_messages_files(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    rank, host = next_culprit()
    shared = [slack_app.slack.add_file("train.log", oom_log(rank))]
    message = slack_app.slack.post_user_message(channel, "our job died overnight", files=shared)
    reply = send.interaction(
        slack_app.url,
        send.message_shortcut(message, channel=channel, response_url=slack_app.slack.response_url()),
    )
    assert reply.status == 200
    [incident] = eventually(lambda: incident_messages(slack_app, channel))
    assert host in blocks_text(incident["blocks"])


def test_message_shortcut_on_a_message_without_a_log_says_so(slack_app: SlackApp) -> None:
    channel = slack_app.channel()
    message = slack_app.slack.post_user_message(channel, "lunch?")
    sink = slack_app.slack.response_url("shortcut-empty")
    send.interaction(slack_app.url, send.message_shortcut(message, channel=channel, response_url=sink))
    [answer] = eventually(
        lambda: [c for c in slack_app.slack.calls_to("response_url") if c.path.endswith("/shortcut-empty")]
    )
    assert b"no log files" in answer.body


def test_home_tab_shows_open_incidents_and_last_weeks_figures(slack_app: SlackApp) -> None:
    _channel, _message, host = new_incident(slack_app)
    event = {"type": "app_home_opened", "user": "U1", "channel": "D0HOME", "tab": "home", "event_ts": "1.2"}
    assert send.event(slack_app.url, event).status == 200
    [published] = eventually(lambda: slack_app.slack.calls_to("views.publish"))
    view = published.params["view"]
    shown = blocks_text(view["blocks"] if isinstance(view, dict) else json.loads(view)["blocks"])
    assert "Open incidents" in shown and host in shown
    assert "Lemon nodes" in shown and "Last 7 days" in shown and "cuda/oom" in shown
