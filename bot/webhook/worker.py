"""The queue handler for accepted job-failure events: the stored payload -> the use case."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bot.services.job_failure import JobFailure, JobFailureService
from bot.services.worker import PermanentError
from bot.store.queue import QueuedItem
from bot.webhook.intake import validation_message
from bot.webhook.payloads import JobFailedEvent


def failure_of(event: JobFailedEvent) -> JobFailure:
    return JobFailure(
        cluster=event.cluster,
        job_id=event.job_id,
        attempt=event.attempt,
        state=event.state,
        exit_code=event.exit_code,
        nodes=tuple(event.nodes),
        user=event.user,
        job_name=event.job_name,
        channel=event.channel,
        logs=tuple((log.name, log.text) for log in event.logs),
        log_paths=tuple(event.log_paths),
        diagnosis=event.diagnosis.to_diagnosis() if event.diagnosis is not None else None,
        diagnosis_digest=event.diagnosis.digest() if event.diagnosis is not None else None,
    )


class JobFailedHandler:
    def __init__(self, service: JobFailureService) -> None:
        self.service = service

    def __call__(self, item: QueuedItem) -> dict[str, Any]:
        try:
            event = JobFailedEvent.model_validate(item.payload)
        except ValidationError as error:  # accepted by an older version with other rules
            raise PermanentError(f"stored event no longer valid: {validation_message(error)}") from None
        return self.service.process(failure_of(event), tries=item.attempts)
