"""Fuzz targets: each takes arbitrary bytes and must end normally or with the one error its contract
allows (a one-line InputError for unusable input); anything else is a bug. Shared by the property tests
(tests/fuzz/test_fuzz_properties.py, hypothesis) and the coverage-guided harness (tests/fuzz/fuzz.py,
atheris), so both hunt the same contracts.

- `reader`: bytes as stdin through the reader (decompression, archives, line splitting).
- `matcher`: bytes as a log through the whole diagnosis (reader, scan, analysis, runbook values).
- `flight_recorder`: bytes as a Flight Recorder dump (pickle or JSON, maybe compressed).
- `slack_payload`: bytes as the body of a correctly signed request to the Slack app (commands, events,
  interactivity), dispatched by bolt in this process against a fake Slack: never a 500, never a listener
  error.
- `webhook_payload`: bytes as the body of an authenticated job-failure webhook: events, or a refusal that
  names why.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from matcher.model import InputError
from matcher.reading.read import ReadLimits, iter_blocks, iter_sources

SECRET = "fuzz-signing-secret"
# Small limits: the contracts hold at any size, and small inputs keep each run fast.
LIMITS = ReadLimits(block_bytes=4096, max_input_bytes=32 << 20)


def reader(data: bytes) -> None:
    try:
        for source in iter_sources(["-"], LIMITS, stdin=io.BytesIO(data)):  # type: ignore[arg-type]
            for block in iter_blocks(source, LIMITS):
                assert block.data.endswith(b"\n")
    except InputError as error:
        assert "\n" not in str(error), error


def matcher(data: bytes) -> None:
    from bot.services.diagnose import DiagnosisRequest, diagnose_and_record

    try:
        outcome = diagnose_and_record(
            DiagnosisRequest(paths=["-"], stdin=io.BytesIO(data), store=False, limits=LIMITS)
        )
    except InputError as error:
        assert "\n" not in str(error), error
        return
    document = outcome.to_json()
    assert document["diagnoses"], document
    json.dumps(document)  # the JSON contract always serialises


def flight_recorder(data: bytes) -> None:
    from matcher.flight_recorder.load import load_dump

    try:
        dump = load_dump(data, "nccl_trace_rank_0")
    except InputError as error:
        assert str(error).startswith("nccl_trace_rank_0: "), error
        return
    assert dump.name == "nccl_trace_rank_0"


class _Inline:
    """An executor that runs each listener at once, so its errors are seen before dispatch returns."""

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # recorded like a pool would
            future.set_exception(error)
        return future


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class SlackApp:
    """The Slack app of `ncclbot serve`, built in this process over a fake Slack and a SQLite store."""

    def __init__(self) -> None:
        from bot.settings import Settings
        from bot.slack.app import build_app, build_deps
        from bot.store import Store
        from tests.fakes.slack_api import FakeSlack

        self.slack = FakeSlack().__enter__()
        root = Path(tempfile.mkdtemp(prefix="ncclbot-fuzz-"))
        settings = Settings(
            slack_bot_token=self.slack.bot_token,
            slack_api_url=self.slack.api_url,
            slack_signing_secret=SECRET,
            database_url=f"sqlite:///{root / 'store.sqlite3'}",
            spool_dir=root / "spool",
            admin_users=["UADMIN"],
        )
        self.store = Store.open(settings.database_url)
        self.deps = build_deps(settings, self.store)
        self.app = build_app(self.deps, listener_executor=_Inline())
        self.http = _flask_client(self.app)
        self.errors = _Errors()
        for name in ("ncclbot", "slack_bolt"):
            logging.getLogger(name).addHandler(self.errors)

    def dispatch(self, body: bytes, content_type: str) -> int:
        from slack_bolt import BoltRequest

        stamp = str(int(time.time()))
        text = body.decode("utf-8", errors="replace")
        signature = (
            "v0=" + hmac.new(SECRET.encode(), f"v0:{stamp}:{text}".encode(), hashlib.sha256).hexdigest()
        )
        headers = {
            "content-type": [content_type],
            "x-slack-request-timestamp": [stamp],
            "x-slack-signature": [signature],
        }
        before = len(self.errors.records)
        response = self.app.dispatch(BoltRequest(body=text, headers=headers))
        errors = self.errors.records[before:]
        assert not errors, [record.getMessage() for record in errors]
        assert response.status != 500, response.body
        return response.status


def _flask_client(app: Any) -> Any:
    """The server's `/slack/events` route over `app`, as a Flask test client."""
    from flask import Flask

    from bot.slack.plug import blueprint

    server = Flask("fuzz")
    server.register_blueprint(blueprint(app))
    return server.test_client()


_SLACK: list[SlackApp] = []


def slack_app() -> SlackApp:
    if not _SLACK:
        _SLACK.append(SlackApp())
    return _SLACK[0]


def slack_payload(data: bytes) -> None:
    """The first byte picks the content type (Slack sends JSON events and form-encoded commands and
    interactivity), the rest is the body."""
    if not data:
        return
    content_type = "application/json" if data[0] % 2 else "application/x-www-form-urlencoded"
    try:
        slack_app().dispatch(data[1:], content_type)
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as error:
        # bolt parses the body before any listener runs; a body Slack would never sign is bolt's
        # business only if it fails there, which these errors may mean: re-raise ours.
        if _raised_in_bot(error):
            raise


def _raised_in_bot(error: BaseException) -> bool:
    trace = error.__traceback__
    while trace is not None:
        if "/bot/" in trace.tb_frame.f_code.co_filename.replace("\\", "/"):
            return True
        trace = trace.tb_next
    return False


def webhook_payload(data: bytes) -> None:
    """Bytes as the body of an authenticated `POST /webhooks/job-failed`: JSON parsed, the shape
    recognised and converted (generic, Slurm, Alertmanager, a diagnosis). The only answers are events or
    a refusal naming why (pydantic's ValidationError, NoEvent, JobError)."""
    from pydantic import ValidationError

    from bot.jobs.model import JobError
    from bot.webhook.shapes import NoEvent, to_events

    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return  # 400 at the intake, before any shape is looked at
    if not isinstance(document, dict):
        return
    query = {"cluster": "c1", "job_id": "1"} if data[:1] == b"{" and len(data) % 2 else {}
    try:
        _shape, events = to_events(document, query)
    except (ValidationError, NoEvent, JobError) as error:
        assert str(error).strip(), error
        return
    for event in events:
        assert event.key.startswith("job-failed/") or "/" in event.key
        json.dumps(event.model_dump(mode="json", by_alias=True))  # what the queue stores


TARGETS: dict[str, Callable[[bytes], None]] = {
    "reader": reader,
    "matcher": matcher,
    "flight_recorder": flight_recorder,
    "slack_payload": slack_payload,
    "webhook_payload": webhook_payload,
}
