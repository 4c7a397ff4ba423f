"""Publishing rules with the in-memory outlet: one top-level message per incident, details in its
thread, repeats counted in the thread, another diagnosis of the same job edits its message, a
placeholder becomes the message or a link to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import runbooks
from bot.render.slack_text import MESSAGE_BLOCKS_LIMIT, SECTION_TEXT_LIMIT
from bot.services.diagnose import DiagnosisOutcome
from bot.services.outlet import InMemoryOutlet, Message
from bot.services.publish import Placeholder, publish_diagnosis
from bot.store import Store
from matcher.model import Diagnosis
from tests.store.diagnoses import make_diagnosis


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'store.sqlite3'}") as opened:
        yield opened


def recorded(store: Store, diagnosis: Diagnosis, digest: str, job_id: str | None = None) -> DiagnosisOutcome:
    incident = store.record_diagnosis(diagnosis, source="slack", job_id=job_id, input_digest=digest)
    runbook = runbooks.render_for(diagnosis.primary.class_id, diagnosis.facts)
    return DiagnosisOutcome(diagnosis=diagnosis, runbook=runbook, input_digest=digest, incident=incident)


def texts(outlet: InMemoryOutlet) -> list[str]:
    return [str(block) for posted in outlet.posted for block in posted.current.blocks]


def test_new_incident_gets_one_message_with_details_in_its_thread(store: Store) -> None:
    outlet = InMemoryOutlet()
    published = publish_diagnosis(outlet, store, "C1", recorded(store, make_diagnosis(), "d1"))
    [top] = outlet.top_level("C1")
    assert top.ref == published.message and published.new_message
    assert "cuda/oom" in top.current.text and "gpu-node-017" in top.current.text
    [details] = outlet.replies(top.ref)
    assert any("Evidence" in str(b) for b in details.message.blocks)
    assert store.incident(published.view.incident_id or 0).slack_ts == top.ref.ts


def test_repeat_of_same_fingerprint_posts_in_thread_and_bumps_the_counter(store: Store) -> None:
    outlet = InMemoryOutlet()
    first = publish_diagnosis(outlet, store, "C1", recorded(store, make_diagnosis(), "d1"))
    again = publish_diagnosis(outlet, store, "C2", recorded(store, make_diagnosis(), "d2"))
    assert again.message == first.message and again.repeat and not again.new_message
    assert len(outlet.top_level()) == 1  # even when the repeat was asked about in another channel
    replies = [p.message.text for p in outlet.replies(first.message)]
    assert replies == ["Evidence and runbook steps", "Seen again"]
    assert "2×" in str(outlet.top_level()[0].current.blocks)


def test_same_input_twice_counts_once_and_posts_no_repeat(store: Store) -> None:
    outlet = InMemoryOutlet()
    first = publish_diagnosis(outlet, store, "C1", recorded(store, make_diagnosis(), "d1"))
    again = publish_diagnosis(outlet, store, "C1", recorded(store, make_diagnosis(), "d1"))
    assert not again.repeat and len(outlet.replies(first.message)) == 1


def test_another_diagnosis_of_the_same_job_edits_its_message(store: Store) -> None:
    outlet = InMemoryOutlet()
    first = publish_diagnosis(outlet, store, "C1", recorded(store, make_diagnosis(), "d1", job_id="771204"))
    xid = make_diagnosis("hardware/gpu-xid", signatures=("xid",), text="NVRM: Xid 79")
    second = publish_diagnosis(outlet, store, "C1", recorded(store, xid, "d2", job_id="771204"), job="771204")
    assert second.message == first.message and len(outlet.top_level()) == 1
    assert "hardware/gpu-xid" in outlet.top_level()[0].current.text
    assert "771204" in str(outlet.top_level()[0].current.blocks)


def test_top_level_placeholder_becomes_the_incident_message(store: Store) -> None:
    outlet = InMemoryOutlet()
    placeholder = outlet.post("C1", Message(text="Reading 1.2 GB from 64 ranks…"))
    published = publish_diagnosis(
        outlet,
        store,
        "C1",
        recorded(store, make_diagnosis(), "d1"),
        placeholder=Placeholder(placeholder, True),
    )
    assert published.message == placeholder and len(outlet.top_level()) == 1
    assert "cuda/oom" in outlet.top_level()[0].current.text


def test_placeholder_in_a_thread_becomes_a_link_to_the_incident(store: Store) -> None:
    outlet = InMemoryOutlet()
    asked = outlet.post("C1", Message(text="a user's message"))
    placeholder = outlet.post("C1", Message(text="Reading…"), thread=asked)
    published = publish_diagnosis(
        outlet,
        store,
        "C1",
        recorded(store, make_diagnosis(), "d1"),
        placeholder=Placeholder(placeholder, False),
    )
    [line] = [p for p in outlet.posted if p.ref == placeholder]
    assert published.message.ts.replace(".", "") in str(line.current.blocks)


def test_details_too_long_for_a_message_come_with_the_full_report_file(store: Store) -> None:
    long_line = "NCCL WARN " + "x" * 450
    diagnosis = make_diagnosis(signatures=tuple(f"sig-{i}" for i in range(12)), text=long_line)
    outlet = InMemoryOutlet()
    published = publish_diagnosis(outlet, store, "C1", recorded(store, diagnosis, "d1"))
    [details] = outlet.replies(published.message)
    assert len(details.message.blocks) <= MESSAGE_BLOCKS_LIMIT
    assert all(
        len(str(b.get("text", {}).get("text", ""))) <= SECTION_TEXT_LIMIT for b in details.message.blocks
    )
    [report] = details.message.files
    assert report.filename.endswith(".txt")
    assert report.content.count(long_line.encode()) == 12  # every line, whole, though the thread shows fewer


def test_unstored_diagnosis_is_posted_without_incident_state(store: Store) -> None:
    diagnosis = make_diagnosis()
    runbook = runbooks.render_for("cuda/oom", {})
    outcome = DiagnosisOutcome(
        diagnosis, runbook, "d1", store_warning="diagnosis not stored: database is locked"
    )
    outlet = InMemoryOutlet()
    publish_diagnosis(outlet, None, "C1", outcome)
    [top] = outlet.top_level()
    assert "database is locked" in str(top.current.blocks)
