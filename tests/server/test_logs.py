"""Server logs: JSON or text, secrets masked wherever they appear, and the request id on every record
logged while a request or a work item is handled."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from bot import logs

BOT_TOKEN = "xoxb-9876-5432-QwErTyUiOp"
DB_PASSWORD = "Pg-pass-5521"


@pytest.fixture
def captured() -> Iterator[tuple[io.StringIO, list[logging.Handler]]]:
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    stream = io.StringIO()
    yield stream, before
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in before:
        root.addHandler(handler)
    root.setLevel(level)


# Loggers outside the `ncclbot` tree: the CLI tests in this process turn that tree's propagation off.
def configure(stream: io.StringIO, log_format: str) -> None:
    logs.configure(log_format, "INFO", secrets=[BOT_TOKEN, DB_PASSWORD, "abc"], stream=stream)


def test_json_lines_carry_request_id_extra_fields_and_no_secrets(captured: tuple[io.StringIO, list]) -> None:
    stream, _ = captured
    configure(stream, "json")
    log = logging.getLogger("tests.logs")
    with logs.request_scope("req-42"):
        log.info("posting with %s to %s", BOT_TOKEN, "C0123", extra={"channel": "C0123", "attempt": 2})
        try:
            raise ConnectionError(f"cannot connect to postgresql://bot:{DB_PASSWORD}@db/ncclbot")
        except ConnectionError:
            log.exception("store down")
    log.info("outside HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789")
    first, second, third = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["request_id"] == "req-42"
    assert first["message"] == "posting with [REDACTED] to C0123"
    assert (first["channel"], first["attempt"], first["logger"], first["level"]) == (
        "C0123",
        2,
        "tests.logs",
        "INFO",
    )
    assert second["request_id"] == "req-42"
    assert "ConnectionError" in second["exception"]
    assert DB_PASSWORD not in second["exception"]
    assert "request_id" not in third
    assert "hf_abcdefghij" not in third["message"]
    assert BOT_TOKEN not in stream.getvalue() and DB_PASSWORD not in stream.getvalue()


def test_short_secrets_do_not_mask_ordinary_words(captured: tuple[io.StringIO, list]) -> None:
    stream, _ = captured
    configure(stream, "json")
    logging.getLogger("tests.logs").warning("abc of NCCL")
    assert json.loads(stream.getvalue())["message"] == "abc of NCCL"


def test_text_lines_show_the_request_id(captured: tuple[io.StringIO, list]) -> None:
    stream, _ = captured
    configure(stream, "text")
    with logs.request_scope("item-7"):
        logging.getLogger("tests.worker").warning("retrying with %s", BOT_TOKEN)
    line = stream.getvalue().strip()
    assert line.endswith("WARNING tests.worker [item-7]: retrying with [REDACTED]")


def test_scopes_nest_and_do_not_leak_into_other_threads() -> None:
    seen: list[str | None] = []
    with logs.request_scope("outer"):
        with logs.request_scope("inner"):
            seen.append(logs.current_request_id())
        seen.append(logs.current_request_id())
        thread = threading.Thread(target=lambda: seen.append(logs.current_request_id()))
        thread.start()
        thread.join()
    seen.append(logs.current_request_id())
    assert seen == ["inner", "outer", None, None]


@pytest.mark.parametrize("hostile", ['a"b', "line\nbreak", "x" * 65, "", "ünïcode"])
def test_an_unsafe_id_is_replaced_by_a_fresh_one(hostile: str) -> None:
    with logs.request_scope(hostile) as chosen:
        assert chosen != hostile
        assert logs.acceptable_request_id(chosen) == chosen


def test_the_context_pool_runs_tasks_under_the_submitters_request_id() -> None:
    with logs.ContextThreadPoolExecutor(2) as pool:
        with logs.request_scope("slack-req-9"):
            inside = pool.submit(logs.current_request_id)
        outside = pool.submit(logs.current_request_id)
        assert (inside.result(timeout=5), outside.result(timeout=5)) == ("slack-req-9", None)
