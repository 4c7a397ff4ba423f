"""Incident actions with the in-memory outlet: each changes the store and redraws the incident's one
message; drain goes through the ClusterActions hook (bot.jobs implements it; here a recording double
stands in for a cluster, which cannot run in this test)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.services.hooks import ActionResult
from bot.services.incidents import ActionError, IncidentActions
from bot.services.outlet import InMemoryOutlet
from bot.services.publish import publish_diagnosis
from bot.store import Store
from tests.services.test_publish import recorded
from tests.store.diagnoses import make_diagnosis


@dataclass
class RecordingCluster:
    calls: list[tuple[str, str, str | None, str]] = field(default_factory=list)

    def drain(self, node: str, *, reason: str, cluster: str | None, actor: str) -> ActionResult:
        self.calls.append((node, reason, cluster, actor))
        return ActionResult(ok=True, message=f"{node} set to DRAIN")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'store.sqlite3'}") as opened:
        yield opened


def incident(store: Store, outlet: InMemoryOutlet) -> int:
    published = publish_diagnosis(outlet, store, "C1", recorded(store, make_diagnosis(), "d1"))
    assert published.view.incident_id is not None
    return published.view.incident_id


def current(outlet: InMemoryOutlet) -> str:
    return str(outlet.top_level()[0].current.blocks)


def test_resolve_redraws_the_message_and_logs_who(store: Store) -> None:
    outlet = InMemoryOutlet()
    actions = IncidentActions(store, outlet)
    view = actions.resolve(incident(store, outlet), "U0ALICE")
    assert view.status == "resolved" and "resolved by <@U0ALICE>" in current(outlet)
    assert store.incidents(open_only=True) == []


def test_snooze_shows_until_when(store: Store) -> None:
    outlet = InMemoryOutlet()
    IncidentActions(store, outlet).snooze(incident(store, outlet), "U1", hours=2)
    assert "snoozed until" in current(outlet)


def test_correction_is_stored_with_its_note_and_shown(store: Store) -> None:
    outlet = InMemoryOutlet()
    incident_id = incident(store, outlet)
    IncidentActions(store, outlet).correct(incident_id, "U1", "system/host-oom", "cgroup limit")
    assert "Corrected by <@U1>" in current(outlet) and "cgroup limit" in current(outlet)
    feedback = store.incident_detail(incident_id).feedback
    assert feedback is not None and (feedback.corrected_class, feedback.note) == (
        "system/host-oom",
        "cgroup limit",
    )


def test_choosing_the_diagnosed_class_confirms_it(store: Store) -> None:
    outlet = InMemoryOutlet()
    incident_id = incident(store, outlet)
    IncidentActions(store, outlet).correct(incident_id, "U1", "cuda/oom", None)
    feedback = store.incident_detail(incident_id).feedback
    assert feedback is not None and feedback.correct and "Corrected" not in current(outlet)


def test_a_class_outside_the_taxonomy_is_refused(store: Store) -> None:
    outlet = InMemoryOutlet()
    with pytest.raises(ActionError, match="not a class"):
        IncidentActions(store, outlet).correct(incident(store, outlet), "U1", "made/up", None)


def test_drain_without_cluster_actions_says_so(store: Store) -> None:
    outlet = InMemoryOutlet()
    result = IncidentActions(store, outlet).drain(incident(store, outlet), "gpu-node-017", "U1")
    assert not result.ok and "not configured" in result.message


def test_drain_calls_the_cluster_actions_and_reports_in_the_thread(store: Store) -> None:
    outlet = InMemoryOutlet()
    cluster = RecordingCluster()
    incident_id = incident(store, outlet)
    result = IncidentActions(store, outlet, cluster).drain(incident_id, "gpu-node-017", "U0ADMIN")
    assert result.ok
    assert cluster.calls == [("gpu-node-017", f"ncclbot #{incident_id}: cuda/oom", None, "U0ADMIN")]
    replies = [p.message.text for p in outlet.replies(outlet.top_level()[0].ref)]
    assert "`gpu-node-017` drained: gpu-node-017 set to DRAIN" in replies


def test_probe_posts_the_verdict_in_the_incident_thread(store: Store) -> None:
    outlet = InMemoryOutlet()
    incident_id = incident(store, outlet)
    result = {"verdict": "healthy", "backend": "gloo", "world_size": 2, "reasons": [], "results": []}
    IncidentActions(store, outlet).probe(incident_id, "gpu-node-017", "U1", lambda node: result)
    replies = [p.message.text for p in outlet.replies(outlet.top_level()[0].ref)]
    assert "Probe on gpu-node-017: HEALTHY" in replies


def test_unknown_incident_is_an_action_error(store: Store) -> None:
    with pytest.raises(ActionError, match="no incident"):
        IncidentActions(store, InMemoryOutlet()).resolve(999, "U1")
