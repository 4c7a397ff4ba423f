"""Property tests over what the server parses from outside: Slack's payloads (signed and structured like
Slack's, with any JSON in their fields; or not signed at all), the events its intake workers take, and
memory that stays bounded whatever the bytes (the reader, the matcher and the Flight Recorder loader;
their crash and hang properties are in tests/matcher/*properties*)."""

from __future__ import annotations

import io
import json
import os
import tracemalloc
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.errors import SlackApiError

from bot.services.worker import is_outage
from bot.slack.files import SharedFile
from bot.slack.listeners.events import take_message
from bot.slack.work import DiagnoseTask
from tests.fuzz import targets

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "120"))
# What the fake Slack answers to ids that name nothing, as Slack does.
SLACK_REFUSALS = {"channel_not_found", "message_not_found", "thread_not_found"}
SLOW = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
# Slack's payloads have a fixed shape (objects where it documents objects), but ids and text can hold
# anything, keys can be missing and values null: that is what is drawn.
ids = st.one_of(
    st.sampled_from(["C1", "U1", "UADMIN", "1764000001.000001", ""]), st.none(), st.text(max_size=30)
)


def objects(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A Slack object with some of `fields` (missing keys included), or null."""
    return st.one_of(st.none(), st.fixed_dictionaries({}, optional=fields))


file_objects = st.lists(
    st.fixed_dictionaries(
        {}, optional={"id": ids, "name": ids, "title": ids, "size": st.one_of(ids, st.integers())}
    ),
    max_size=3,
)


@st.composite
def commands(draw: st.DrawFn) -> tuple[bytes, str]:
    verb = draw(st.sampled_from(["", "help", "status", "history", "probe", "diagnose", "nonsense"]))
    text = verb + draw(st.one_of(st.just(""), st.text(max_size=60).map(lambda t: " " + t)))
    fields = {
        "command": "/nccl",
        "text": text,
        "channel_id": draw(st.text(max_size=12)),
        "user_id": draw(st.sampled_from(["U1", "UADMIN", ""])),
        "trigger_id": draw(st.text(max_size=20)),
        "team_id": "T0FAKE",
    }
    return urlencode(fields).encode(), "application/x-www-form-urlencoded"


@st.composite
def events(draw: st.DrawFn) -> tuple[bytes, str]:
    event: dict[str, Any] = {
        "type": draw(st.sampled_from(["app_mention", "message", "app_home_opened", "reaction_added"])),
        "subtype": draw(st.sampled_from([None, "file_share", "bot_message"])),
        "channel": draw(ids),
        "ts": draw(ids),
        "user": draw(ids),
        "text": draw(st.one_of(st.text(max_size=200), ids)),
        "files": draw(st.one_of(st.none(), file_objects)),
        "thread_ts": draw(st.one_of(st.none(), ids)),
        "channel_type": draw(st.sampled_from(["channel", "im", None])),
    }
    envelope = {
        "type": "event_callback",
        "event_id": draw(st.text(max_size=16)),
        "team_id": "T0FAKE",
        "event": {k: v for k, v in event.items() if v is not None},
    }
    return json.dumps(envelope).encode(), "application/json"


@st.composite
def interactions(draw: st.DrawFn) -> tuple[bytes, str]:
    action_ids = [
        "incident.engineer",
        "incident.oncall",
        "incident.probe",
        "incident.drain",
        "incident.resolve",
        "incident.snooze",
        "incident.wrong",
    ]
    kind = draw(st.sampled_from(["block_actions", "view_submission", "message_action"]))
    payload: dict[str, Any] = {
        "type": kind,
        "user": draw(objects(id=ids)),
        "channel": draw(objects(id=ids)),
        "trigger_id": draw(st.text(max_size=20)),
        "team": {"id": "T0FAKE"},
    }
    if kind == "block_actions":
        value = draw(st.one_of(json_values.map(json.dumps), st.text(max_size=40)))
        payload["actions"] = [{"action_id": draw(st.sampled_from(action_ids)), "value": value}]
        payload["container"] = draw(objects(channel_id=ids, message_ts=ids))
    elif kind == "view_submission":
        payload["view"] = {  # Slack always names the view's type; bolt itself relies on it
            "type": "modal",
            "id": draw(st.text(max_size=8)),
            "callback_id": draw(st.sampled_from(["diagnose.modal", "feedback.modal"])),
            "private_metadata": draw(st.one_of(json_values.map(json.dumps), st.text(max_size=40))),
            "state": {
                "values": draw(
                    st.dictionaries(
                        st.sampled_from(["files", "pasted", "class", "note"]),
                        st.dictionaries(
                            st.sampled_from(["files", "pasted", "class", "note"]),
                            objects(value=ids, files=file_objects, selected_option=objects(value=ids)),
                        ),
                    )
                )
            },
        }
    else:
        payload["callback_id"] = "diagnose_message"
        payload["response_url"] = targets.slack_app().slack.response_url()  # Slack always sends one
        payload["message"] = draw(objects(ts=ids, thread_ts=ids, files=file_objects, text=ids))
    return urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded"


@SLOW
@given(request=st.one_of(commands(), events(), interactions()))
def test_signed_slack_payloads_of_any_shape_never_fail_the_app(request: tuple[bytes, str]) -> None:
    body, content_type = request
    status = targets.slack_app().dispatch(body, content_type)
    assert status in (200, 401, 404), status


@SLOW
@given(
    body=st.one_of(st.binary(max_size=300), json_values.map(lambda v: json.dumps(v).encode())),
    content_type=st.sampled_from(["application/json", "application/x-www-form-urlencoded", "text/plain"]),
)
def test_unsigned_bodies_are_refused_whatever_they_hold(body: bytes, content_type: str) -> None:
    """Through the server's own route (bot.slack.plug): 401, or 400 for what bolt cannot even parse."""
    client = targets.slack_app().http
    headers = {"X-Slack-Request-Timestamp": "1", "X-Slack-Signature": "v0=00"}
    response = client.post("/slack/events", data=body, content_type=content_type, headers=headers)
    assert response.status_code in (400, 401), response.status_code


@SLOW
@given(
    event=st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["app_mention", "message"]),
            "channel": ids,
            "ts": ids,
            "thread_ts": ids,
            "text": ids,
            "files": st.one_of(st.none(), file_objects),
            "user": ids,
            "channel_type": st.sampled_from(["im", "channel"]),
        },
    )
)
def test_an_intake_worker_takes_any_event_without_failing(event: dict[str, Any]) -> None:
    """It answers, or Slack refuses the answer (a channel that does not exist: the queue retries it a
    few times and gives up); nothing else."""
    try:
        take_message(targets.slack_app().deps, event)
    except SlackApiError as error:
        assert not is_outage(error) and error.response.get("error") in SLACK_REFUSALS, error


@SLOW
@given(
    item=st.fixed_dictionaries(
        {}, optional={"id": json_values, "name": json_values, "title": json_values, "size": json_values}
    )
)
def test_a_shared_file_is_read_from_any_payload(item: dict[str, Any]) -> None:
    shared = SharedFile.from_payload(item)
    assert isinstance(shared.size, int) and shared.size >= 0
    task = DiagnoseTask(channel="C1", placeholder=None, placeholder_top_level=True, files=(shared,))
    assert DiagnoseTask.from_payload(json.loads(json.dumps(task.to_payload()))) == task


def peak_bytes(run: Callable[[], None]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


BOUND = 96 << 20  # far above what any of these inputs should need, far below what a blow-up takes
repetitive = st.tuples(st.binary(min_size=1, max_size=64), st.integers(1, 4000)).map(lambda p: p[0] * p[1])


@settings(max_examples=max(20, EXAMPLES // 4), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.one_of(repetitive, st.binary(max_size=4096)),
    target=st.sampled_from(["reader", "matcher", "flight_recorder"]),
)
def test_memory_stays_bounded_whatever_the_bytes(data: bytes, target: str) -> None:
    assert peak_bytes(lambda: targets.TARGETS[target](data)) < BOUND


def test_memory_is_bounded_for_part_a_bombs() -> None:
    """The Flight Recorder shapes that once took gigabytes, through the fuzz targets' contracts."""
    from tests.reliability.hostile import INPUTS

    for hostile in INPUTS:
        if hostile.name.startswith("fr-") or hostile.name == "gzip-bomb":
            data = hostile.make()
            target = targets.reader if hostile.name == "gzip-bomb" else targets.flight_recorder
            assert peak_bytes(lambda d=data, t=target: t(d)) < BOUND, hostile.name


def test_a_pasted_log_reads_like_a_file() -> None:
    """The matcher target really diagnoses (a target that swallowed everything would pass above)."""
    log = b"[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    from bot.services.diagnose import DiagnosisRequest, diagnose_and_record

    outcome = diagnose_and_record(DiagnosisRequest(paths=["-"], stdin=io.BytesIO(log), store=False))
    assert outcome.diagnosis.primary.class_id == "cuda/oom"


webhook_documents = st.fixed_dictionaries(
    {},
    optional={
        "source": st.sampled_from(["slurm", "generic", None]),
        "cluster": ids,
        "job_id": st.one_of(ids, st.integers()),
        "attempt": st.one_of(st.integers(), ids),
        "state": ids,
        "exit_code": st.one_of(st.integers(), ids),
        "node_list": st.one_of(ids, st.sampled_from(["gpu-[1-3,7]", "n[0-999999]", "a[", "x[1-2]y[3-4]"])),
        "nodes": st.one_of(st.lists(ids, max_size=3), json_values),
        "logs": st.one_of(
            st.lists(
                st.fixed_dictionaries({"name": ids, "text": st.one_of(st.text(max_size=200), json_values)}),
                max_size=3,
            ),
            json_values,
        ),
        "log_paths": st.one_of(st.lists(ids, max_size=2), json_values),
        "alerts": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "status": st.sampled_from(["firing", "resolved"]),
                        "labels": st.dictionaries(
                            st.sampled_from(["job_name", "namespace", "cluster", "pod"]), ids
                        ),
                    }
                ),
                max_size=2,
            ),
            json_values,
        ),
        "diagnosis": st.one_of(
            json_values, st.fixed_dictionaries({"diagnoses": json_values, "culprit": json_values})
        ),
        "channel": ids,
    },
)


@SLOW
@given(document=webhook_documents)
def test_any_webhook_document_becomes_events_or_a_named_refusal(document: dict[str, Any]) -> None:
    targets.webhook_payload(json.dumps(document).encode())
