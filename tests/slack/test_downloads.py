"""Downloading shared files over real HTTP: the bot token only goes to Slack (or the configured API
host), a redirect is never followed with it, the cap holds while streaming even when files.info
understates the size, and each failure is one line for a person."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from slack_sdk import WebClient

from bot.slack.files import Downloader, FileProblem, SharedFile, token_may_go_to
from tests.fakes.slack_api import FakeSlack


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


def downloader(slack: FakeSlack, cap: int = 1 << 20) -> Downloader:
    client = WebClient(token=slack.bot_token, base_url=slack.api_url)
    return Downloader(client, token=slack.bot_token, api_url=slack.api_url, cap=cap, spool_dir=None)


def test_file_is_streamed_to_the_spool_with_the_bot_token(slack: FakeSlack, tmp_path: Path) -> None:
    shared = slack.add_file("rank3.log", b"line\n" * 1000)
    spooled = downloader(slack).fetch(SharedFile.from_payload(shared), tmp_path)
    assert spooled.path.read_bytes() == b"line\n" * 1000 and spooled.name == "rank3.log"
    [download] = slack.calls_to("download")
    assert download.headers["authorization"] == f"Bearer {slack.bot_token}"
    assert spooled.origin == f"slack:{shared['id']}"


def test_understated_size_is_caught_while_streaming(slack: FakeSlack, tmp_path: Path) -> None:
    shared = slack.add_file("big.log", b"x" * 5000, reported_size=10)
    with pytest.raises(FileProblem, match=r"big.log is over this bot's cap of 1.0 KB"):
        downloader(slack, cap=1000).fetch(SharedFile.from_payload(shared), tmp_path)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # the partial file is gone


def test_hostile_file_name_stays_in_the_spool(slack: FakeSlack, tmp_path: Path) -> None:
    shared = slack.add_file("../../etc/passwd", b"root:x:0:0\n")
    spooled = downloader(slack).fetch(SharedFile.from_payload(shared), tmp_path)
    assert tmp_path in spooled.path.parents and spooled.name == "passwd"


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://files.slack.com/files-pri/T1-F1/download/a.log", True),
        ("https://slack.com/files-pri/x", True),
        ("http://files.slack.com/files-pri/x", False),  # never over plain HTTP
        ("https://files.slack.com.evil.example/x", False),
        ("https://evil.example/files.slack.com/x", False),
        ("http://127.0.0.1:9/api/x", False),  # not the configured API host
    ],
)
def test_token_goes_only_to_slack_hosts(url: str, allowed: bool) -> None:
    assert token_may_go_to(url, "https://slack.com/api/") is allowed


class _Redirector(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def log_message(self, *_args: Any) -> None:
        pass

    def do_GET(self) -> None:
        _Redirector.seen.append({k.lower(): v for k, v in self.headers.items()})
        if self.path.startswith("/files-pri/"):
            self.send_response(302)
            self.send_header("Location", f"http://{self.headers['Host']}/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            body = b"stolen?"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)


def test_redirect_is_not_followed_with_the_token(slack: FakeSlack, tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        client = WebClient(token=slack.bot_token, base_url=slack.api_url)
        # The redirecting host plays the API host, so the token may go to it, but not onwards.
        loader = Downloader(client, token=slack.bot_token, api_url=base + "api/", cap=1 << 20, spool_dir=None)
        shared = slack.add_file("a.log", b"data")
        info = {
            "id": shared["id"],
            "name": "a.log",
            "size": 4,
            "url_private_download": base + "files-pri/a.log",
        }
        loader._info = lambda _shared: info  # type: ignore[method-assign]  # files.info pointing at this host
        with pytest.raises(FileProblem, match=r"downloading a\.log failed"):
            loader.fetch(SharedFile.from_payload(shared), tmp_path)
        assert [h.get("authorization") for h in _Redirector.seen] == [f"Bearer {slack.bot_token}"]
    finally:
        server.shutdown()
        server.server_close()
