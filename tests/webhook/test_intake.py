"""The webhook over real HTTP: statuses and messages for every kind of bad request, 202 only once the
event is in the database, posted once per (cluster, job, attempt) however often it is sent."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.services.bundles import bundle_logs
from bot.store import Store
from bot.store.queue import WorkQueue
from tests.conftest import need_service
from tests.fixtures.postgres_server import postgres_bin, private_postgres
from tests.webhook.harness import SECRET, running_webhook, settings_for
from tests.webhook.test_shapes import example

OOM = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
XID = (
    "Nov 30 03:11:02 gpu-node-007 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, "
    "GPU has fallen off the bus.\n"
)


def wait_for(condition: Callable[[], object], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not true after {timeout} s"
        time.sleep(0.05)


def test_an_accepted_event_is_diagnosed_and_posted_once_naming_the_job(database_url: str) -> None:
    with running_webhook(settings_for(database_url)) as webhook:
        first = webhook.send(example("generic"))
        assert first.status == 202, first.body
        assert first.body["accepted"][0]["duplicate"] is False
        wait_for(lambda: webhook.top_level_for("48213"))
        for second in range(1, 4):  # the sender retries (a timeout on its side), signing anew: nothing new
            again = webhook.send(example("generic"), now=time.time() + second)
            assert (again.status, again.body["accepted"][0]["duplicate"]) == (202, True)
        time.sleep(1.0)
        [post] = webhook.outlet.top_level()
        assert post.ref.channel == "C0123INCIDENTS"
        assert post.message.text.startswith("cuda/oom: CUDA out of memory on a rank")
        assert "*Job:* `48213` on `prod-a`" in json.dumps(post.message.blocks)
        assert [reply.message.text for reply in webhook.outlet.replies(post.ref)] == [
            "Evidence and runbook steps"
        ]


def test_another_attempt_of_the_same_job_is_a_new_event_told_in_the_incidents_thread(
    database_url: str,
) -> None:
    requeued = example("generic")
    requeued["attempt"] = 1
    requeued["logs"][0]["text"] += "[rank3]: (second attempt)\n"
    with running_webhook(settings_for(database_url)) as webhook:
        assert webhook.send(example("generic")).status == 202
        wait_for(lambda: webhook.top_level_for("48213"))
        assert webhook.send(requeued).status == 202
        [post] = webhook.top_level_for("48213")
        wait_for(lambda: any(r.message.text == "Seen again" for r in webhook.outlet.replies(post.ref)))
        assert len(webhook.outlet.top_level()) == 1


def test_a_job_whose_logs_cannot_be_had_is_still_posted_saying_why(tmp_path: Path) -> None:
    settings = settings_for(
        f"sqlite:///{tmp_path / 's.db'}",
        job_sources={"*": "directory"},
        job_log_template=str(tmp_path / "logs/{cluster}/{job_id}"),
    )
    with running_webhook(settings) as webhook:
        assert webhook.send({"cluster": "c1", "job_id": "77", "state": "TIMEOUT"}).status == 202
        wait_for(lambda: webhook.top_level_for("77"))
        [post] = webhook.outlet.top_level()
        assert "TIMEOUT: job 77 on c1 — not diagnosed" in post.message.text
        assert "logs not found: no logs for job 77" in json.dumps(post.message.blocks)


def test_log_paths_are_read_only_under_the_configured_roots(tmp_path: Path) -> None:
    allowed, secret = tmp_path / "shared", tmp_path / "private"
    for folder in (allowed, secret):
        folder.mkdir()
        (folder / "rank0.log").write_text(
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        )
    (allowed / "escape.log").symlink_to(secret / "rank0.log")
    settings = settings_for(
        f"sqlite:///{tmp_path / 's.db'}",
        webhook_log_roots=[allowed],
        job_sources={"*": "directory"},
        job_log_template=str(tmp_path / "none/{job_id}"),
    )
    with running_webhook(settings) as webhook:
        webhook.send({"cluster": "c1", "job_id": "1", "log_paths": [str(allowed / "rank0.log")]})
        webhook.send({"cluster": "c1", "job_id": "2", "log_paths": [str(secret / "rank0.log")]})
        webhook.send({"cluster": "c1", "job_id": "3", "log_paths": [str(allowed / "escape.log")]})
        wait_for(lambda: all(webhook.top_level_for(job) for job in ("1", "2", "3")))
        assert webhook.top_level_for("1")[0].message.text.startswith("cuda/oom")
        for job in ("2", "3"):
            assert webhook.top_level_for(job)[0].message.text == f"FAILED: job {job} on c1 — not diagnosed"


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        (b"{}", {}, 401, "missing X-NCCLBot-Signature"),
        (b"not json", None, 400, "body is not JSON"),
        (b"[1, 2]", None, 400, "must be a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, None, 400, "body is not JSON"),
        (b'{"cluster": "c1"}', None, 422, "job_id: Field required"),
        (b'{"cluster": "c1", "job_id": "1;reboot"}', None, 422, "job_id: Value error, invalid job id"),
    ],
)
def test_bad_requests_get_their_status_and_a_one_line_reason(
    tmp_path: Path, body: bytes, headers: dict[str, str] | None, status: int, message: str
) -> None:
    from bot.webhook.auth import signed_headers

    with running_webhook(settings_for(f"sqlite:///{tmp_path / 's.db'}")) as webhook:
        answer = webhook.post(body, signed_headers(SECRET, body) if headers is None else headers)
        assert answer.status == status
        assert message in answer.body["error"]
        assert "\n" not in answer.body["error"]
        assert WorkQueue(Store.open(f"sqlite:///{tmp_path / 's.db'}")).items() == []


def test_a_body_over_the_cap_is_refused_from_its_content_length_before_it_is_read(tmp_path: Path) -> None:
    import socket

    settings = settings_for(f"sqlite:///{tmp_path / 's.db'}", webhook_max_bytes=1024)
    with running_webhook(settings) as webhook:
        host, port = webhook.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            # Headers only: a server that waited for the promised gigabyte would never answer.
            connection.sendall(
                b"POST /webhooks/job-failed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1073741824\r\n\r\n"
            )
            reply = connection.recv(65536).decode()
        assert reply.startswith("HTTP/1.1 413")


def test_the_intake_refuses_an_oversized_body_without_reading_it() -> None:
    """Behind a WSGI server that streams bodies (not waitress), the intake's own check is what stops it."""
    from bot.webhook.auth import WebhookAuth
    from bot.webhook.intake import JobFailedIntake

    def never_read() -> bytes:
        raise AssertionError("the body was read")

    intake = JobFailedIntake(WebhookAuth(secret=SECRET), queue=None, max_bytes=1024)  # type: ignore[arg-type]
    reply = intake.accept({}, 1025, never_read, {})
    assert reply.status == 413
    assert "1025 bytes is over the 1024-byte cap" in reply.body["error"]
    assert intake.accept({}, None, never_read, {}).status == 411


def test_a_bearer_token_is_accepted_for_alertmanager(tmp_path: Path) -> None:
    settings = settings_for(f"sqlite:///{tmp_path / 's.db'}", webhook_bearer_token="am-token")
    with running_webhook(settings) as webhook:
        body = json.dumps(example("alertmanager")).encode()
        answer = webhook.post(body, {"Authorization": "Bearer am-token", "Content-Type": "application/json"})
        assert (answer.status, answer.body["shape"]) == (202, "alertmanager")
        wrong = webhook.post(body, {"Authorization": "Bearer guess"})
        assert (wrong.status, wrong.body["error"]) == (401, "wrong bearer token")


@pytest.mark.postgres
def test_the_database_down_is_503_and_once_it_is_back_events_are_accepted_and_posted() -> None:
    need_service(
        postgres_bin() is not None, "PostgreSQL binaries are not installed (.ci/services/postgres.sh)"
    )
    with private_postgres() as server, running_webhook(settings_for(server.url)) as webhook:
        assert webhook.send(example("generic")).status == 202
        wait_for(lambda: webhook.top_level_for("48213"))
        server.stop()
        answer = webhook.send({**example("generic"), "job_id": "48214"})
        assert answer.status == 503
        assert answer.body["error"].startswith("the database is unavailable, nothing was accepted")
        assert answer.headers.get("Retry-After") == "30"
        server.start()
        deadline = time.monotonic() + 90
        while (again := webhook.send({**example("generic"), "job_id": "48214"})).status == 503:
            assert time.monotonic() < deadline, again.body  # the pool reconnects
            time.sleep(0.5)
        assert again.status == 202
        # The same failure in another job: a repeat of the incident, told in its thread.
        wait_for(
            lambda: any("`48214`" in json.dumps(p.message.blocks) for p in webhook.outlet.posted), timeout=90
        )


def test_hostile_log_text_is_diagnosed_and_posted_without_pinging_anyone(tmp_path: Path) -> None:
    text = "<!channel> \ud800 [rank0]: torch.OutOfMemoryError: CUDA out of memory. <https://evil|docs>\n"
    event = {
        "cluster": "c1",
        "job_id": "5",
        "job_name": "<@U123> run",
        "logs": [{"name": "r0.log", "text": text}],
    }
    with running_webhook(settings_for(f"sqlite:///{tmp_path / 's.db'}")) as webhook:
        assert webhook.send(event).status == 202
        wait_for(lambda: webhook.top_level_for("5"))
        [post] = webhook.outlet.top_level()
    # What Slack parses as mrkdwn: the fallback text and every mrkdwn field (plain_text is shown as is).
    parsed = [post.message.text, *mrkdwn_fields(post.message.blocks)]
    assert "cuda/oom" in post.message.text
    assert len(parsed) > 3
    for text in parsed:
        assert "<!channel>" not in text and "<@U123>" not in text and "<https://evil" not in text


def mrkdwn_fields(node: object) -> list[str]:
    if isinstance(node, dict):
        own = [node["text"]] if node.get("type") == "mrkdwn" else []
        return own + [t for value in node.values() for t in mrkdwn_fields(value)]
    if isinstance(node, list | tuple):
        return [t for value in node for t in mrkdwn_fields(value)]
    return []


def test_the_logs_of_a_posted_job_stay_with_its_incident_for_files_added_later(tmp_path: Path) -> None:
    """Inline logs are copied into the incident's bundle (their scratch folder is gone afterwards), a
    job's own log files are kept as references: a file posted later in the incident's thread is then
    diagnosed together with them (bot.services.bundles.bundle_logs is what that re-run reads)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "kern.log").write_text(XID)
    settings = settings_for(
        f"sqlite:///{tmp_path / 's.db'}", spool_dir=tmp_path / "spool", webhook_log_roots=[shared]
    )
    with running_webhook(settings) as webhook:
        inline = {"cluster": "c1", "job_id": "11", "logs": [{"name": "rank3.log", "text": OOM}]}
        assert webhook.send(inline).status == 202
        own = {"cluster": "c2", "job_id": "12", "log_paths": [str(shared / "kern.log")]}
        assert webhook.send(own).status == 202
        wait_for(lambda: webhook.top_level_for("11") and webhook.top_level_for("12"))
    with Store.open(settings.database_url) as store:
        by_class = {s.class_id: s for s in store.incidents()}
        copied = store.bundle(by_class["cuda/oom"].id).files
        referenced = store.bundle(by_class["hardware/gpu-xid"].id).files
        logs = bundle_logs(store, by_class["cuda/oom"].id)
    [copy] = copied
    assert (copy.name, copy.external) == ("rank3.log", False)
    assert (
        Path(copy.path).is_relative_to(tmp_path / "spool" / "bundles") and Path(copy.path).read_text() == OOM
    )
    assert logs.paths == [copy.path] and logs.occurrence_id == copy.occurrence_id is not None
    [reference] = referenced
    assert (reference.path, reference.external) == (str(shared / "kern.log"), True)
