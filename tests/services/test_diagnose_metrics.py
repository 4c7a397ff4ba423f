"""Every diagnosis, whichever front end asked for it, is counted in the Prometheus metrics."""

from __future__ import annotations

from bot.metrics import BYTES_READ, DIAGNOSES
from bot.services.diagnose import DiagnosisRequest, diagnose_and_record
from tests.cli.helpers import EXAMPLE


def test_each_diagnosis_is_counted_by_class_and_source() -> None:
    counter = DIAGNOSES.labels(class_id="cuda/oom", source="slack")
    before, read_before = counter._value.get(), BYTES_READ._value.get()
    outcome = diagnose_and_record(DiagnosisRequest(paths=[str(EXAMPLE)], source="slack", store=False))
    assert counter._value.get() == before + 1
    assert BYTES_READ._value.get() == read_before + outcome.diagnosis.stats.bytes
