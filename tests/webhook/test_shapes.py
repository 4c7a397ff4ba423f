"""Every accepted payload shape becomes the generic event, with the job named and validated; the
examples are the README's (tests/webhook/examples/)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bot.jobs.model import JobError
from bot.webhook.intake import validation_message
from bot.webhook.shapes import NoEvent, to_events

EXAMPLES = Path(__file__).parent / "examples"


def example(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text())
    return document


def test_the_generic_event_keeps_its_fields_and_is_keyed_by_cluster_job_and_attempt() -> None:
    shape, [event] = to_events(example("generic"), {})
    assert shape == "generic"
    assert event.key == "prod-a/48213/0"
    assert (event.state, event.exit_code, event.nodes) == ("FAILED", 1, ["gpu-node-017", "gpu-node-018"])
    assert [log.name for log in event.logs] == ["rank3.log"]


def test_a_slurm_epilog_payload_expands_the_node_list_and_leaves_patterns_to_the_job_source() -> None:
    shape, [event] = to_events(example("slurm"), {})
    assert shape == "slurm"
    assert event.nodes == ["gpu-node-017", "gpu-node-018"]
    assert (event.exit_code, event.attempt, event.received_as) == (1, 0, "slurm")
    assert event.log_paths == []  # %x-%j is expanded by the slurm source, which knows the job


def test_a_slurm_payload_with_expanded_paths_sends_them_and_a_requeued_job_is_a_new_attempt() -> None:
    document = {**example("slurm"), "std_out": "/shared/llama/logs/train-48213.out", "restart_count": 2}
    _, [event] = to_events(document, {})
    assert event.log_paths == ["/shared/llama/logs/train-48213.out"]
    assert event.key == "prod-a/48213/2"


def test_alertmanager_firing_alerts_become_events_and_resolved_ones_are_ignored() -> None:
    shape, events = to_events(example("alertmanager"), {})
    assert shape == "alertmanager"
    assert [e.key for e in events] == ["k8s-east/research/bert-large/0"]


def test_an_alertmanager_group_naming_no_job_is_refused_with_the_labels_it_needs() -> None:
    document = example("alertmanager")
    for alert in document["alerts"]:
        alert["labels"].pop("job_name")
    with pytest.raises(NoEvent, match="job_id"):
        to_events(document, {})


def test_a_precomputed_diagnosis_travels_instead_of_logs() -> None:
    _, [event] = to_events(example("diagnosis"), {})
    assert event.diagnosis is not None
    diagnosis = event.diagnosis.to_diagnosis()
    assert diagnosis.primary.class_id == "network/ib-rdma"
    assert diagnosis.culprit is not None and diagnosis.culprit.hosts == ("gpu-node-018",)
    assert diagnosis.facts["culprit_host"] == "gpu-node-018"


def test_a_bare_diagnosis_names_its_job_in_the_query_string() -> None:
    bare = example("diagnosis")["diagnosis"]
    shape, [event] = to_events(bare, {"cluster": "prod-a", "job_id": "48213", "attempt": "1"})
    assert (shape, event.key) == ("diagnosis", "prod-a/48213/1")
    with pytest.raises(NoEvent, match=r"\?cluster=...&job_id=..."):
        to_events(bare, {})


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"job_id": "12; rm -rf /"}, "job_id"),
        ({"cluster": "../etc"}, "cluster"),
        ({"nodes": ["gpu-node-017", "bad host"]}, "nodes"),
        ({"logs": [{"name": "../../etc/passwd", "text": "x"}]}, "logs.0.name"),
        ({"log_paths": ["relative/path"]}, "log_paths"),
        (
            {"logs": [{"name": "rank0.log", "text": "a"}, {"name": "rank0.log", "text": "b"}]},
            "two logs are named",
        ),
        ({"attempt": -1}, "attempt"),
        ({"channel": "<!channel>"}, "channel"),
        (
            {"diagnosis": {"schema_version": 1, "diagnoses": [{"class": "made/up", "confidence": 0.5}]}},
            "class",
        ),
        ({"diagnosis": {"schema_version": 2, "diagnoses": []}}, "schema_version"),
    ],
)
def test_hostile_or_malformed_fields_are_refused_naming_the_field(change: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as raised:
        to_events({**example("generic"), **change}, {})
    assert where in validation_message(raised.value)


def test_a_missing_required_field_is_named() -> None:
    document = example("generic")
    document.pop("job_id")
    with pytest.raises(ValidationError) as raised:
        to_events(document, {})
    assert validation_message(raised.value).startswith("job_id: Field required")


def test_a_bad_slurm_host_list_is_refused() -> None:
    with pytest.raises(JobError, match="host list"):
        to_events({**example("slurm"), "node_list": "gpu-[1-"}, {})


def readme_payloads() -> list[str]:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Failed jobs post themselves", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```json\n(.+?)\n```", section, re.DOTALL)


def test_every_payload_the_readme_shows_is_accepted() -> None:
    payloads = readme_payloads()
    assert len(payloads) == 3
    shapes = [to_events(json.loads(text), {})[0] for text in payloads]
    assert shapes == ["generic", "generic", "slurm"]
