"""One request id through a diagnosis: the id of the request that queued the work is on every log line
the worker writes while handling it, and never appears in the handler's payload."""

from __future__ import annotations

import logging

import pytest

from bot import logs
from bot.services.worker import QueueWorker
from bot.store import Store
from bot.store.queue import QueuedItem, WorkQueue


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.addFilter(logs.RequestIdFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def recorder() -> Recorder:
    handler = Recorder()
    logger = logging.getLogger("ncclbot.test-handler")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)


def test_the_worker_logs_under_the_enqueuing_requests_id(store: Store, recorder: Recorder) -> None:
    queue = WorkQueue(store)
    payloads: list[dict[str, object]] = []

    def handle(item: QueuedItem) -> None:
        payloads.append(item.payload)
        logging.getLogger("ncclbot.test-handler").info("diagnosing job %s", item.payload["job_id"])

    with logs.request_scope("webhook-req-1"):
        queue.enqueue("job-failed", "c1/77/0", {"job_id": "77"})
    queue.enqueue("job-failed", "c1/78/0", {"job_id": "78"})  # queued outside any request

    worker = QueueWorker(queue, {"job-failed": handle}, threads=1)
    assert worker.run_once() and worker.run_once()
    assert payloads == [{"job_id": "77"}, {"job_id": "78"}]
    ids = [record.request_id for record in recorder.records]  # type: ignore[attr-defined]
    [second_item] = [item for item in queue.items() if item.key == "c1/78/0"]
    assert ids == ["webhook-req-1", f"item-{second_item.id}"]
    assert logs.current_request_id() is None
