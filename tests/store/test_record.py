"""Recording diagnoses: grouping into incidents, idempotency, recurrence lines, costs (both backends)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bot.store import Store, StoreError
from bot.store.settings import INCIDENT_WINDOW
from matcher.rules import ANALYSIS_VERSION
from tests.store.conftest import T0
from tests.store.diagnoses import make_diagnosis


def test_first_sighting_opens_an_incident(store: Store) -> None:
    record = store.record_diagnosis(make_diagnosis(), input_digest="a" * 64, now=T0)
    assert record.new_incident and not record.duplicate
    assert record.recurrence_line is None
    assert record.to_json() == {
        "id": record.id,
        "fingerprint": record.fingerprint,
        "occurrences": 1,
        "first_seen": "2026-11-20T03:11:00Z",
        "last_seen": "2026-11-20T03:11:00Z",
    }
    assert record.culprit_hosts == ("gpu-node-017",)


def test_same_fingerprint_within_the_window_joins_the_incident(store: Store) -> None:
    first = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    second = store.record_diagnosis(
        make_diagnosis(host="GPU-NODE-017.cluster.local"), input_digest="d2", now=T0 + timedelta(days=2)
    )
    third = store.record_diagnosis(make_diagnosis(), input_digest="d3", now=T0 + timedelta(days=4))
    assert second.id == first.id == third.id
    assert not second.new_incident
    assert third.occurrences == 3
    assert third.first_seen == T0 and third.last_seen == T0 + timedelta(days=4)
    assert second.recurrence_line == "2nd time on gpu-node-017 in 7 days; first seen 2026-11-20 03:11 UTC"
    assert third.recurrence_line == "3rd time on gpu-node-017 in 7 days; first seen 2026-11-20 03:11 UTC"


def test_after_the_window_a_new_incident_opens_and_the_line_says_so(store: Store) -> None:
    first = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    later = T0 + INCIDENT_WINDOW + timedelta(days=7)
    again = store.record_diagnosis(make_diagnosis(), input_digest="d2", now=later)
    assert again.id != first.id and again.new_incident and again.occurrences == 1
    assert again.recurrence_line == (
        "2nd time on gpu-node-017, none other in 7 days; first seen 2026-11-20 03:11 UTC"
    )


def test_other_host_or_class_is_another_incident(store: Store) -> None:
    base = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    other_host = store.record_diagnosis(make_diagnosis(host="gpu-node-018"), input_digest="d2", now=T0)
    other_class = store.record_diagnosis(
        make_diagnosis("hardware/gpu-xid", signatures=("xid",)), input_digest="d3", now=T0
    )
    assert len({base.id, other_host.id, other_class.id}) == 3
    assert other_host.recurrence_line is None and other_class.recurrence_line is None


def test_class_level_recurrence_without_a_host(store: Store) -> None:
    no_host = make_diagnosis("timeout/rank0-only-work", host=None, signatures=("barrier-timeout",))
    store.record_diagnosis(no_host, input_digest="d1", cluster="west", now=T0)
    store.record_diagnosis(no_host, input_digest="d2", cluster="east", now=T0 + timedelta(hours=1))
    third = store.record_diagnosis(no_host, input_digest="d3", cluster="west", now=T0 + timedelta(days=1))
    # Incidents are per cluster: west's two occurrences are one incident, east's is another.
    assert third.occurrences == 2
    assert third.recurrence_line == (
        "2nd time for timeout/rank0-only-work in 7 days; first seen 2026-11-20 03:11 UTC"
    )


def test_same_job_and_input_is_recorded_once(store: Store) -> None:
    first = store.record_diagnosis(make_diagnosis(), job_id="4242", input_digest="d1", now=T0)
    replay = store.record_diagnosis(
        make_diagnosis(), job_id="4242", input_digest="d1", now=T0 + timedelta(hours=1)
    )
    assert replay.duplicate and not replay.new_incident
    assert (replay.id, replay.occurrence_id, replay.occurrences) == (first.id, first.occurrence_id, 1)
    # The same bytes under another job, or with no job, are other occurrences.
    other_job = store.record_diagnosis(make_diagnosis(), job_id="4243", input_digest="d1", now=T0)
    no_job = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    no_job_again = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    assert not other_job.duplicate and not no_job.duplicate and no_job_again.duplicate
    assert no_job_again.occurrences == 3
    assert len(store.history(days=1, now=T0 + timedelta(hours=2))) == 3


def test_resolved_incident_is_not_joined(store: Store) -> None:
    first = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    store.resolve_incident(first.id, "alice", "replaced GPU 3", now=T0 + timedelta(hours=1))
    again = store.record_diagnosis(make_diagnosis(), input_digest="d2", now=T0 + timedelta(hours=5))
    assert again.id != first.id and again.new_incident


def test_snoozed_incident_is_joined_and_reopens_after_the_snooze(store: Store) -> None:
    first = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    store.snooze(first.id, "bob", T0 + timedelta(hours=6), now=T0 + timedelta(hours=1))
    during = store.record_diagnosis(make_diagnosis(), input_digest="d2", now=T0 + timedelta(hours=2))
    assert (during.id, during.status) == (first.id, "snoozed")
    after = store.record_diagnosis(make_diagnosis(), input_digest="d3", now=T0 + timedelta(hours=8))
    assert (after.id, after.status, after.occurrences) == (first.id, "open", 3)


def test_occurrence_keeps_size_timeout_and_cost(store: Store) -> None:
    diagnosis = make_diagnosis(
        facts={"timeout_ms": 1_800_000, "world_size": 64, "since_progress_ms": 600_000}
    )
    store.record_diagnosis(
        diagnosis, input_digest="d1", source="webhook", job_id="77", cluster="west", now=T0
    )
    unknown_timeout = make_diagnosis(host="gpu-node-020", seen_ranks=8)
    store.record_diagnosis(unknown_timeout, input_digest="d2", now=T0)
    rows = {o.host: o for o in store.history(days=1, now=T0)}
    assert rows["gpu-node-017"].gpu_hours_lost == pytest.approx(64 * 40 / 60)
    assert (rows["gpu-node-017"].source, rows["gpu-node-017"].job_id) == ("webhook", "77")
    assert rows["gpu-node-017"].cluster == "west"
    # Without a timeout there is no honest cost; the ranks seen stand in for an unknown world size.
    assert rows["gpu-node-020"].gpu_hours_lost is None and rows["gpu-node-020"].world_size == 8


def test_occurrence_keeps_the_analysis_version_that_produced_it(store: Store) -> None:
    older = replace(make_diagnosis(), analysis_version="ncclbot-2026-11-29")
    store.record_diagnosis(older, input_digest="old", now=T0)
    store.record_diagnosis(make_diagnosis(host="gpu-node-020"), input_digest="new", now=T0)
    rows = {o.host: o for o in store.history(days=1, now=T0)}
    assert rows["gpu-node-017"].analysis_version == "ncclbot-2026-11-29"
    assert rows["gpu-node-020"].analysis_version == ANALYSIS_VERSION
    assert rows["gpu-node-020"].to_json()["analysis_version"] == ANALYSIS_VERSION


def test_bad_arguments_are_clear_errors(store: Store) -> None:
    with pytest.raises(StoreError, match="time zone"):
        store.record_diagnosis(make_diagnosis(), input_digest="d", now=datetime(2026, 1, 1))
    with pytest.raises(StoreError, match="source"):
        store.record_diagnosis(make_diagnosis(), input_digest="d", source="email", now=T0)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="no incident"):
        store.resolve_incident(999, "alice", "nothing")
    with pytest.raises(StoreError, match="verdict"):
        store.record_probe_run({"verdict": "great"}, node="gpu-node-017")


def test_incident_actions_are_audited(store: Store) -> None:
    from sqlalchemy import select

    from bot.store.models import AuditLog, Feedback

    record = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    store.set_slack_message(record.id, "C123", "1732850000.000100")
    store.record_feedback(record.id, "U42", correct=False, corrected_class="system/host-oom", now=T0)
    resolved = store.resolve_incident(record.id, "alice", "  drained node  ", now=T0 + timedelta(hours=3))
    assert (resolved.status, resolved.resolved_by, resolved.resolution_fix) == (
        "resolved",
        "alice",
        "drained node",
    )
    with pytest.raises(StoreError, match="resolved"):
        store.snooze(record.id, "bob", T0 + timedelta(days=30), now=T0 + timedelta(hours=4))
    with store._read() as session:
        actions = [(a.actor, a.action) for a in session.scalars(select(AuditLog).order_by(AuditLog.id))]
        feedback = session.scalars(select(Feedback)).one()
    assert actions == [("ncclbot", "slack-message"), ("U42", "feedback"), ("alice", "resolve")]
    assert (feedback.correct, feedback.corrected_class) == (False, "system/host-oom")
    again = store.record_diagnosis(make_diagnosis(), input_digest="d2", now=T0 + timedelta(hours=5))
    assert (again.slack_channel, again.slack_ts) == (None, None)  # a new incident gets its own message


def test_probe_runs_are_stored_with_their_node(store: Store) -> None:
    started = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
    result = {"verdict": "failed", "reasons": ["wrong result on rank 3"], "backend": "nccl", "world_size": 8}
    run_id = store.record_probe_run(
        result,
        node="GPU-NODE-017.cluster.local",
        cluster="west",
        started=started,
        finished=started + timedelta(minutes=2),
    )
    runs = store.probe_runs(days=7, node="gpu-node-017", now=started + timedelta(hours=1))
    assert [(r.id, r.host, r.cluster, r.verdict) for r in runs] == [
        (run_id, "gpu-node-017", "west", "failed")
    ]
    assert runs[0].result == result
    assert store.probe_runs(days=7, node="gpu-node-018", now=started + timedelta(hours=1)) == []
