"""What the chat front end keeps in the store, on SQLite and PostgreSQL: processed event keys, the files
of an incident's bundle (bounded), feedback notes, the diagnosis document, and finding an incident by
its message or its job."""

from __future__ import annotations

from datetime import timedelta

from bot.store import Store
from tests.store.conftest import T0
from tests.store.diagnoses import make_diagnosis


def test_an_event_key_is_taken_once(store: Store) -> None:
    assert store.mark_processed("event:Ev1", now=T0)
    assert not store.mark_processed("event:Ev1", now=T0 + timedelta(seconds=30))
    assert store.mark_processed("event:Ev2", now=T0)


def test_old_event_keys_are_forgotten(store: Store) -> None:
    assert store.mark_processed("event:Ev1", now=T0)
    assert store.mark_processed("event:Ev1", now=T0 + timedelta(days=3))


def test_bundle_files_join_once_and_the_oldest_go_beyond_the_bound(store: Store) -> None:
    incident = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    assert store.add_incident_file(
        incident.id, name="rank0.log", path="/b/0", size_bytes=600, origin="slack:F1", now=T0
    )
    assert not store.add_incident_file(
        incident.id, name="rank0.log", path="/b/0", size_bytes=600, origin="slack:F1"
    )
    later = T0 + timedelta(minutes=5)
    assert store.add_incident_file(
        incident.id, name="dmesg", path="/b/1", size_bytes=600, origin="slack:F2", now=later
    )
    assert store.prune_incident_files(1000) == ["/b/0"]
    assert [f.name for f in store.incident_files(incident.id)] == ["dmesg"]


def test_detail_has_document_feedback_note_and_first_message(store: Store) -> None:
    first = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    store.set_slack_message(first.id, "C1", "1764000000.000100")
    store.resolve_incident(first.id, "U1", "replaced GPU", now=T0 + timedelta(hours=1))
    again = store.record_diagnosis(make_diagnosis(), input_digest="d2", now=T0 + timedelta(days=2))
    assert again.id != first.id  # the first was resolved: a new incident, a recurrence
    store.record_feedback(again.id, "U2", correct=False, corrected_class="system/host-oom", note=" cgroup ")
    detail = store.incident_detail(again.id)
    assert detail.document is not None and detail.document["diagnoses"][0]["class"] == "cuda/oom"
    assert detail.feedback is not None
    assert (detail.feedback.corrected_class, detail.feedback.note) == ("system/host-oom", "cgroup")
    assert detail.recurrence_line is not None and detail.recurrence_line.startswith(
        "2nd time on gpu-node-017"
    )
    assert detail.first_message == ("C1", "1764000000.000100")


def test_incident_is_found_by_its_message_and_by_its_job(store: Store) -> None:
    incident = store.record_diagnosis(
        make_diagnosis(), input_digest="d1", job_id="771204", cluster="east", now=T0
    )
    assert store.incident_for_message("C1", "1.2") is None
    store.set_slack_message(incident.id, "C1", "1.2")
    found = store.incident_for_message("C1", "1.2")
    assert found is not None and found.id == incident.id
    assert store.message_for_job("771204", "east") == ("C1", "1.2")
    assert store.message_for_job("771204", "west") is None


def test_feedback_cases_take_the_newest_feedback_per_incident(store: Store) -> None:
    incident = store.record_diagnosis(make_diagnosis(), input_digest="d1", now=T0)
    store.record_feedback(incident.id, "U1", correct=False, corrected_class="system/host-oom", now=T0)
    store.record_feedback(incident.id, "U2", correct=True, now=T0 + timedelta(minutes=1))
    [(summary, feedback, files)] = store.feedback_cases()
    assert summary.id == incident.id and feedback.correct and feedback.user == "U2" and files == []


def test_a_refined_diagnosis_replaces_its_occurrence_and_counts_nothing(store: Store) -> None:
    first = store.record_diagnosis(
        make_diagnosis("unknown", host=None, signatures=()), input_digest="d1", now=T0
    )
    refined = store.refine_occurrence(
        first.occurrence_id, make_diagnosis("hardware/gpu-xid", signatures=("xid-79",)), input_digest="d2"
    )
    assert (refined.id, refined.occurrence_id, refined.occurrences) == (first.id, first.occurrence_id, 1)
    assert refined.refined and not refined.duplicate
    summary = store.incident(first.id)
    assert (summary.class_id, summary.culprit_hosts, summary.occurrences) == (
        "hardware/gpu-xid",
        ("gpu-node-017",),
        1,
    )
    [row] = store.history(days=30, now=T0 + timedelta(minutes=1))
    assert row.class_id == "hardware/gpu-xid"
    again = store.refine_occurrence(
        first.occurrence_id, make_diagnosis("hardware/gpu-xid"), input_digest="d2"
    )
    assert again.duplicate and again.occurrences == 1  # the same re-run retried changes nothing
    assert store.repeat_notes(first.id) == []  # a refinement is no repeat


def test_a_bundle_is_one_occurrences_files_and_job_logs_are_kept_where_they_are(store: Store) -> None:
    first = store.record_diagnosis(make_diagnosis(), input_digest="d1", source="slack", now=T0)
    store.add_incident_file(
        first.id,
        name="a.log",
        path="/b/a",
        size_bytes=10,
        origin="slack:F1",
        occurrence_id=first.occurrence_id,
    )
    repeat = store.record_diagnosis(make_diagnosis(), input_digest="d2", source="webhook", job_id="7", now=T0)
    assert repeat.id == first.id and repeat.occurrences == 2
    store.add_incident_file(
        first.id,
        name="7",
        path="/logs/7",
        size_bytes=0,
        origin="job:/logs/7",
        occurrence_id=repeat.occurrence_id,
        external=True,
    )
    bundle = store.bundle(first.id)
    assert bundle.occurrence_id == repeat.occurrence_id  # the newest diagnosis' files, not both jobs'
    assert [(f.path, f.external) for f in bundle.files] == [("/logs/7", True)]
    assert store.prune_incident_files(0) == ["/b/a"]  # a job's own logs are never deleted
    [note] = store.repeat_notes(first.id)
    assert (note.occurrence_id, note.ordinal, note.job_id) == (repeat.occurrence_id, 2, "7")
