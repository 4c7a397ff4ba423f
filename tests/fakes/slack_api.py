"""A fake Slack Web API that runs in the tests: a real HTTP server on 127.0.0.1 (stdlib `http.server` in a
thread, free port), in the manner of bolt-python's own `tests/mock_web_api_server`.

Point `SLACK_API_URL` (or `WebClient(base_url=...)`) at `fake.api_url` and the code under test talks real
HTTP to it. The fake

* records every call (`calls`, `calls_to(method)`): method, merged params (query string, form or JSON
  body), headers;
* keeps the messages it was sent per channel (`messages(channel)`, `thread(channel, ts)`), so
  `chat.update` edits them and `conversations.history` / `conversations.replies` return them with their
  metadata;
* serves file downloads only with the bot token (without it: Slack's HTML login page with status 200, as
  the real Slack does), and can serve a login page even with the token (`add_file(login_page=True)`);
* implements the three-step upload of `files_upload_v2` (`files.getUploadURLExternal` hands back an
  `upload_url` on this server, the upload POST, `files.completeUploadExternal`);
* answers `usergroups.users.list`, `views.open/update/publish`, `auth.test`, a `response_url` sink;
* answers 429 with Retry-After or 5xx on demand (`fail(method, status, times)`), to every call for a
  while (`outage(status)` ... `recover()`), or late (`delay_answers(method, seconds)`: the call is done,
  the answer waits);
* runs a Socket Mode endpoint: `apps.connections.open` (app-level token) returns a `ws://127.0.0.1` URL of
  a small WebSocket server (`websockets` library) that pushes envelopes (`socket_send`) and records the
  acknowledgements (`socket_acks`).

`eventually(check)` polls until a condition holds (the app answers in background threads).

    with FakeSlack() as slack:
        ...  # run the app with SLACK_API_URL=slack.api_url, SLACK_BOT_TOKEN=slack.bot_token
        eventually(lambda: len(slack.calls_to("chat.postMessage")) == 1)
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

BOT_TOKEN = "xoxb-fake-bot-token"
APP_TOKEN = "xapp-fake-app-token"
BOT_USER = "UBOT"
BOT_ID = "BBOT"
TEAM = "T0FAKE"
LOGIN_PAGE = b"<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in to Slack</body></html>"

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One request the fake received. `method` is the Web API method ("chat.postMessage") or, for the
    other endpoints, "download", "upload", "response_url"."""

    method: str
    params: dict[str, Any]
    headers: dict[str, str]
    at: float
    body: bytes = b""
    path: str = ""

    @property
    def token(self) -> str | None:
        value = self.headers.get("authorization", "")
        return value.removeprefix("Bearer ") if value.startswith("Bearer ") else self.params.get("token")

    def blocks(self) -> list[dict[str, Any]]:
        blocks = self.params.get("blocks") or []
        return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


@dataclass
class FakeFile:
    id: str
    name: str
    content: bytes
    mimetype: str = "text/plain"
    filetype: str = "text"
    login_page: bool = False  # serve Slack's login page even to the bot token
    delay: float = 0.0  # seconds before the download starts (a slow file host)
    reported_size: int | None = None  # what files.info claims, when it is not the truth
    channel: str | None = None
    thread_ts: str | None = None
    title: str = ""

    def info(self, base: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title or self.name,
            "mimetype": self.mimetype,
            "filetype": self.filetype,
            "size": len(self.content) if self.reported_size is None else self.reported_size,
            "url_private": f"{base}files-pri/{self.id}/{self.name}",
            "url_private_download": f"{base}files-pri/{self.id}/download/{self.name}",
        }


@dataclass
class Failure:
    status: int
    retry_after: int | None
    remaining: int


@dataclass
class FakeSlackState:
    """Everything the fake remembers; guarded by `lock`."""

    calls: list[Call] = field(default_factory=list)
    channels: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    files: dict[str, FakeFile] = field(default_factory=dict)
    failures: dict[str, list[Failure]] = field(default_factory=dict)
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    views: list[dict[str, Any]] = field(default_factory=list)
    outage: Failure | None = None  # every call fails like this until recover()
    # method -> seconds to wait after doing the call and before answering (a slow or hung Slack)
    answer_delays: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeSlack:
    """The fake Slack Web API server (and its Socket Mode endpoint). Use as a context manager."""

    def __init__(self, bot_token: str = BOT_TOKEN, app_token: str = APP_TOKEN) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.state = FakeSlackState()
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="fake-slack", daemon=True)
        self._socket: _SocketModeServer | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> FakeSlack:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    @property
    def root_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/"

    @property
    def api_url(self) -> str:
        """The Web API base URL (what `SLACK_API_URL` is set to)."""
        return self.root_url + "api/"

    def env(self) -> dict[str, str]:
        """Environment of an `ncclbot serve` that talks to this fake."""
        return {"SLACK_API_URL": self.api_url, "SLACK_BOT_TOKEN": self.bot_token}

    # -- what tests set up ---------------------------------------------------------------------------

    def add_file(
        self,
        name: str,
        content: bytes,
        *,
        mimetype: str = "text/plain",
        filetype: str = "text",
        login_page: bool = False,
        delay: float = 0.0,
        reported_size: int | None = None,
    ) -> dict[str, Any]:
        """Make a file downloadable; returns its file object as Slack puts it in events and shortcuts."""
        fake = FakeFile(
            id=f"F{next(self._ids):08d}",
            name=name,
            content=content,
            mimetype=mimetype,
            filetype=filetype,
            login_page=login_page,
            delay=delay,
            reported_size=reported_size,
        )
        with self.state.lock:
            self.state.files[fake.id] = fake
        return fake.info(self.root_url)

    def set_usergroup(self, group: str, users: list[str]) -> None:
        with self.state.lock:
            self.state.usergroups[group] = list(users)

    def fail(self, method: str, status: int = 429, *, times: int = 1, retry_after: int | None = 1) -> None:
        """Answer the next `times` calls of `method` with `status` (429 carries Retry-After)."""
        with self.state.lock:
            self.state.failures.setdefault(method, []).append(
                Failure(status=status, retry_after=retry_after if status == 429 else None, remaining=times)
            )

    def outage(self, status: int = 500, *, retry_after: int | None = 1) -> None:
        """From now on every call (Web API, file downloads and uploads) answers `status` (429 with
        Retry-After) until `recover()`: Slack is down, or rate-limits everything."""
        with self.state.lock:
            self.state.outage = Failure(
                status=status, retry_after=retry_after if status == 429 else None, remaining=0
            )

    def recover(self) -> None:
        with self.state.lock:
            self.state.outage = None

    def delay_answers(self, method: str, seconds: float) -> None:
        """Do calls of `method` at once but answer them `seconds` later (0: at once again): the caller
        can die after Slack acted and before it heard so."""
        with self.state.lock:
            self.state.answer_delays[method] = seconds

    def response_url(self, name: str = "") -> str:
        """A `response_url` that lands in this fake (recorded as method "response_url")."""
        return f"{self.root_url}response/{name or uuid.uuid4().hex}"

    def post_user_message(
        self, channel: str, text: str, *, user: str = "U1", thread_ts: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """A message a person posted (so that history and replies contain it); returns it."""
        message = {"type": "message", "user": user, "text": text, "ts": self.next_ts(), **extra}
        if thread_ts:
            message["thread_ts"] = thread_ts
        with self.state.lock:
            self.state.channels.setdefault(channel, []).append(message)
        return message

    # -- what tests read -----------------------------------------------------------------------------

    @property
    def calls(self) -> list[Call]:
        with self.state.lock:
            return list(self.state.calls)

    def calls_to(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    def messages(self, channel: str) -> list[dict[str, Any]]:
        """The channel's messages as they are now (edits applied), oldest first, threads included."""
        with self.state.lock:
            return [dict(m) for m in self.state.channels.get(channel, [])]

    def top_level(self, channel: str) -> list[dict[str, Any]]:
        return [m for m in self.messages(channel) if m.get("thread_ts") in (None, m["ts"])]

    def thread(self, channel: str, ts: str) -> list[dict[str, Any]]:
        return [m for m in self.messages(channel) if m.get("thread_ts") == ts and m["ts"] != ts]

    def bot_messages(self, channel: str) -> list[dict[str, Any]]:
        return [m for m in self.messages(channel) if m.get("bot_id") == BOT_ID]

    def uploads(self) -> list[FakeFile]:
        with self.state.lock:
            return [f for f in self.state.files.values() if f.channel is not None]

    def next_ts(self) -> str:
        return f"{1_764_000_000 + next(self._ts)}.{next(self._ids):06d}"

    # -- Socket Mode -----------------------------------------------------------------------------------

    def socket_mode(self) -> _SocketModeServer:
        """Start (once) the WebSocket endpoint that `apps.connections.open` hands out."""
        if self._socket is None:
            self._socket = _SocketModeServer()
        return self._socket

    # -- the Web API -----------------------------------------------------------------------------------

    def handle(self, method: str, params: dict[str, Any], token: str | None) -> tuple[int, dict[str, Any]]:
        """Answer one Web API call: (HTTP status, JSON body)."""
        if method == "apps.connections.open":
            if token != self.app_token:
                return 200, {"ok": False, "error": "invalid_auth"}
            return 200, {"ok": True, "url": self.socket_mode().url}
        if token != self.bot_token:
            return 200, {"ok": False, "error": "invalid_auth"}
        answer = getattr(self, "_api_" + method.replace(".", "_"), None)
        if answer is None:
            return 200, {"ok": False, "error": "unknown_method"}
        result: dict[str, Any] = answer(params)
        return 200, result

    def _api_auth_test(self, _params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "user_id": BOT_USER, "bot_id": BOT_ID, "team_id": TEAM, "user": "ncclbot"}

    def _api_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = params.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        message: dict[str, Any] = {
            "type": "message",
            "ts": self.next_ts(),
            "text": params.get("text", ""),
            "blocks": _json(params.get("blocks")) or [],
            "bot_id": BOT_ID,
            "user": BOT_USER,
        }
        if params.get("thread_ts"):
            message["thread_ts"] = params["thread_ts"]
        if params.get("metadata"):
            message["metadata"] = _json(params["metadata"])
        with self.state.lock:
            self.state.channels.setdefault(channel, []).append(message)
            if params.get("thread_ts"):
                self._bump_replies(channel, params["thread_ts"])
        return {"ok": True, "channel": channel, "ts": message["ts"], "message": message}

    def _bump_replies(self, channel: str, parent_ts: str) -> None:
        for message in self.state.channels.get(channel, []):
            if message["ts"] == parent_ts:
                message["thread_ts"] = parent_ts
                message["reply_count"] = message.get("reply_count", 0) + 1

    def _api_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = params.get("channel"), params.get("ts")
        with self.state.lock:
            for message in self.state.channels.get(str(channel), []):
                if message["ts"] == ts:
                    message["text"] = params.get("text", message.get("text", ""))
                    if "blocks" in params:
                        message["blocks"] = _json(params["blocks"]) or []
                    message["edited"] = {"user": BOT_USER, "ts": self.next_ts()}
                    return {"ok": True, "channel": channel, "ts": ts, "text": message["text"]}
        return {"ok": False, "error": "message_not_found"}

    def _api_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "message_ts": self.next_ts()}

    def _api_views_open(self, params: dict[str, Any]) -> dict[str, Any]:
        view = _json(params.get("view")) or {}
        view = {**view, "id": f"V{next(self._ids):08d}"}
        with self.state.lock:
            self.state.views.append(view)
        return {"ok": True, "view": view}

    _api_views_update = _api_views_open
    _api_views_publish = _api_views_open

    def _api_files_info(self, params: dict[str, Any]) -> dict[str, Any]:
        with self.state.lock:
            fake = self.state.files.get(str(params.get("file")))
        if fake is None:
            return {"ok": False, "error": "file_not_found"}
        return {"ok": True, "file": fake.info(self.root_url)}

    def _api_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        fake = FakeFile(id=f"F{next(self._ids):08d}", name=str(params.get("filename", "file")), content=b"")
        with self.state.lock:
            self.state.files[fake.id] = fake
        return {"ok": True, "file_id": fake.id, "upload_url": f"{self.root_url}upload/{fake.id}"}

    def _api_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        done = []
        with self.state.lock:
            for item in _json(params.get("files")) or []:
                fake = self.state.files.get(item["id"])
                if fake is None:
                    return {"ok": False, "error": "file_not_found"}
                fake.title = item.get("title") or fake.name
                fake.channel = params.get("channel_id")
                fake.thread_ts = params.get("thread_ts")
                done.append(fake.info(self.root_url))
        return {"ok": True, "files": done}

    def _api_conversations_history(self, params: dict[str, Any]) -> dict[str, Any]:
        limit = int(params.get("limit") or 100)
        metadata = str(params.get("include_all_metadata", "")).lower() in {"1", "true"}
        with self.state.lock:
            found = [
                dict(m)
                for m in self.state.channels.get(str(params.get("channel")), [])
                if m.get("thread_ts") in (None, m["ts"])
            ]
        found.reverse()  # newest first, as Slack answers
        if not metadata:
            for message in found:
                message.pop("metadata", None)
        return {"ok": True, "messages": found[:limit], "has_more": len(found) > limit}

    def _api_conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        ts = params.get("ts")
        with self.state.lock:
            found = [
                dict(m)
                for m in self.state.channels.get(str(params.get("channel")), [])
                if m["ts"] == ts or m.get("thread_ts") == ts
            ]
        if not found:
            return {"ok": False, "error": "thread_not_found"}
        return {"ok": True, "messages": found[: int(params.get("limit") or 1000)], "has_more": False}

    def _api_usergroups_users_list(self, params: dict[str, Any]) -> dict[str, Any]:
        with self.state.lock:
            users = self.state.usergroups.get(str(params.get("usergroup")))
        if users is None:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": users}

    # -- request plumbing ------------------------------------------------------------------------------

    def record(self, call: Call) -> None:
        with self.state.lock:
            self.state.calls.append(call)

    def take_failure(self, method: str) -> Failure | None:
        with self.state.lock:
            if self.state.outage is not None:
                return self.state.outage
            queue = self.state.failures.get(method, [])
            if not queue:
                return None
            failure = queue[0]
            failure.remaining -= 1
            if failure.remaining <= 0:
                queue.pop(0)
            return failure

    def file_for_download(self, path: str) -> FakeFile | None:
        parts = path.strip("/").split("/")
        with self.state.lock:
            return self.state.files.get(parts[1]) if len(parts) >= 3 else None

    def store_upload(self, file_id: str, content: bytes) -> bool:
        with self.state.lock:
            fake = self.state.files.get(file_id)
            if fake is None:
                return False
            fake.content = content
            return True


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _handler_for(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read `calls`
            pass

        def do_GET(self) -> None:
            self._dispatch(b"")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if len(body) < length:
                # The client died between its headers and the end of its body (a `kill -9`): Slack acts
                # on no request it did not receive whole, so neither is it recorded nor answered here.
                self.close_connection = True
                return
            self._dispatch(body)

        def _dispatch(self, body: bytes) -> None:
            url = urlsplit(self.path)
            headers = {key.lower(): value for key, value in self.headers.items()}
            params: dict[str, Any] = dict(parse_qsl(url.query))
            content_type = headers.get("content-type", "")
            if body and "json" in content_type:
                params.update(json.loads(body))
            elif body and "x-www-form-urlencoded" in content_type and not url.path.startswith("/upload/"):
                # An upload's body is the file's bytes (a PNG is no form), whatever slack_sdk labels it.
                params.update(parse_qsl(body.decode()))
            path = url.path
            if path.startswith("/api/"):
                method = path.removeprefix("/api/")
            elif path.startswith("/files-pri/"):
                method = "download"
            elif path.startswith("/upload/"):
                method = "upload"
            elif path.startswith("/response/"):
                method = "response_url"
            else:
                method = path
            fake.record(
                Call(method=method, params=params, headers=headers, at=time.monotonic(), body=body, path=path)
            )

            failure = fake.take_failure(method)
            if failure is not None:
                extra = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
                error = "ratelimited" if failure.status == 429 else "fatal_error"
                self._send(failure.status, json.dumps({"ok": False, "error": error}).encode(), extra=extra)
                return
            if method == "download":
                self._download(path, headers)
            elif method == "upload":
                stored = fake.store_upload(path.rsplit("/", 1)[-1], body)
                self._send(200 if stored else 404, b"OK - " + str(len(body)).encode(), "text/plain")
            elif method == "response_url":
                self._send(200, b"ok", "text/plain")
            elif path.startswith("/api/"):
                token = headers.get("authorization", "").removeprefix("Bearer ") or params.get("token")
                status, answer = fake.handle(method, params, token)
                with fake.state.lock:
                    delay = fake.state.answer_delays.get(method, 0.0)
                if delay:
                    time.sleep(delay)
                self._send(status, json.dumps(answer).encode())
            else:
                self._send(404, b"not found", "text/plain")

        def _download(self, path: str, headers: dict[str, str]) -> None:
            fake_file = fake.file_for_download(path)
            if fake_file is None:
                self._send(404, b"not found", "text/plain")
                return
            time.sleep(fake_file.delay)
            authorised = headers.get("authorization") == f"Bearer {fake.bot_token}"
            if not authorised or fake_file.login_page:
                self._send(200, LOGIN_PAGE, "text/html; charset=utf-8")
                return
            self._send(200, fake_file.content, fake_file.mimetype)

        def _send(
            self,
            status: int,
            body: bytes,
            content_type: str = "application/json; charset=utf-8",
            extra: dict[str, str] | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler


class _SocketModeServer:
    """A WebSocket endpoint that speaks Socket Mode's envelope protocol: says hello on connect, pushes
    envelopes, records the app's acknowledgements."""

    def __init__(self) -> None:
        from websockets.sync.server import serve

        self.acks: list[dict[str, Any]] = []
        self._connections: list[Any] = []
        self._lock = threading.Lock()
        self._server = serve(self._session, "127.0.0.1", 0)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-socket", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.socket.getsockname()[:2]
        return f"ws://{host}:{port}/link"

    @property
    def connected(self) -> int:
        with self._lock:
            return len(self._connections)

    def _session(self, connection: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        connection.send(json.dumps({"type": "hello", "num_connections": 1, "debug_info": {}}))
        with self._lock:
            self._connections.append(connection)
        try:
            for raw in connection:
                with self._lock:
                    self.acks.append(json.loads(raw))
        except ConnectionClosed:
            pass
        finally:
            with self._lock:
                self._connections.remove(connection)

    def send(self, envelope_type: str, payload: dict[str, Any], *, retry_attempt: int = 0) -> str:
        """Push one envelope to the connected app; returns its envelope id."""
        envelope_id = uuid.uuid4().hex
        envelope = {
            "envelope_id": envelope_id,
            "type": envelope_type,
            "payload": payload,
            "accepts_response_payload": envelope_type != "events_api",
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
        }
        with self._lock:
            connections = list(self._connections)
        if not connections:
            raise AssertionError("no Socket Mode client is connected")
        connections[-1].send(json.dumps(envelope))
        return envelope_id

    def ack_for(self, envelope_id: str) -> dict[str, Any] | None:
        with self._lock:
            return next((a for a in self.acks if a.get("envelope_id") == envelope_id), None)

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)


def eventually(check: Callable[[], T], *, timeout: float = 20.0, interval: float = 0.05) -> T:
    """Poll `check` until it returns something truthy (returned) or raises nothing; fail after `timeout`
    with the last assertion or value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = value
        except AssertionError as error:
            last = error
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout:.0f} s: {last!r}")
        time.sleep(interval)


def wait_idle(fake: FakeSlack, quiet: float = 0.5, timeout: float = 20.0) -> None:
    """Wait until the fake has received no call for `quiet` seconds (the app finished its work)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        calls = fake.calls
        if not calls or time.monotonic() - calls[-1].at >= quiet:
            return
        time.sleep(0.05)
    raise AssertionError("the app kept calling Slack")


def iter_blocks_text(blocks: list[dict[str, Any]]) -> Iterator[str]:
    """Every text a Block Kit layout shows (sections, fields, context, headers, buttons)."""
    for block in blocks:
        for key in ("text",):
            if isinstance(block.get(key), dict):
                yield block[key].get("text", "")
        for item in block.get("fields", []) or []:
            yield item.get("text", "")
        for element in block.get("elements", []) or []:
            if isinstance(element.get("text"), dict):
                yield element["text"].get("text", "")
            elif isinstance(element.get("text"), str):
                yield element["text"]


def blocks_text(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(iter_blocks_text(blocks))


def render_message(message: dict[str, Any]) -> str:
    """A message as the fake received it, drawn as text: one line per block (headers, sections,
    fields, context, buttons), Slack's mrkdwn left as it is."""
    lines: list[str] = []
    for block in message.get("blocks") or [{"type": "section", "text": {"text": message.get("text", "")}}]:
        kind = block.get("type")
        if kind == "header":
            lines.append(f"# {block['text']['text']}")
        elif kind == "section":
            if block.get("text"):
                lines.extend(block["text"]["text"].splitlines())
            lines.extend(item["text"] for item in block.get("fields") or [])
        elif kind == "context":
            lines.append("  " + "  ·  ".join(element.get("text", "") for element in block["elements"]))
        elif kind == "actions":
            lines.append(" ".join(f"[{element['text']['text']}]" for element in block["elements"]))
        elif kind == "divider":
            lines.append("────")
    return "\n".join(lines)
