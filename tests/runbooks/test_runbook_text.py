"""The terminal rendering: readable at 80 columns, commands unchanged in meaning when wrapped."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

import runbooks
from bot.render.runbook_text import render, wrap_command
from matcher.taxonomy import CLASSES

VALUES: dict[str, str | int | float] = {
    "culprit_host": "gpu-node-017",
    "culprit_rank": 13,
    "xid": 79,
    "timeout_ms": 600000,
    "job_id": 4242,
}


def unwrap(lines: list[str]) -> str:
    """What the shell reads from the wrapped lines: backslash-newline joins lines."""
    return "\n".join(lines).replace(" \\\n", " ")


@pytest.mark.parametrize("class_id", sorted(CLASSES))
@pytest.mark.parametrize("width", [80, 60])
def test_lines_fit_the_width_unless_one_word_cannot(class_id: str, width: int) -> None:
    text = render(runbooks.render_for(class_id, VALUES), width=width)
    for line in text.splitlines():
        if len(line) > width:
            # Only an unbreakable word (a quoted shell argument or a URL) may stick out.
            body = line.strip().removesuffix(" \\")
            assert " " not in body or body[0] in "'\"", line


@pytest.mark.parametrize("class_id", sorted(CLASSES))
def test_text_shows_every_part_with_values_filled(class_id: str) -> None:
    rendered = runbooks.render_for(class_id, VALUES)
    text = render(rendered)
    for heading in (
        "Executive:",
        "Engineer:",
        "On-call",
        "Steps:",
        "Verify the fix:",
        "Dead ends",
        "Prevention",
        "References:",
    ):
        assert heading in text
    assert class_id in text
    for reference in rendered.references:
        assert reference in text
    for step in rendered.steps:
        if step.command:
            first_word = shlex.split(step.command)[0]
            assert first_word in text


def test_brief_text_keeps_what_to_do_and_points_to_the_rest() -> None:
    rendered = runbooks.render_for("shm/dev-shm", VALUES)
    brief = render(rendered, brief=True)
    assert "Executive:" in brief and "Steps:" in brief and "Verify the fix:" in brief
    assert "Dead ends (do not bother):" not in brief and "References:" not in brief
    assert "ncclbot runbook shm/dev-shm" in brief
    assert render(rendered).startswith(brief.rsplit("\n\nDead ends, prevention", 1)[0])


def test_gpu_xid_text_names_the_node_in_the_drain_command() -> None:
    text = render(runbooks.render_for("hardware/gpu-xid", VALUES))
    assert "scontrol update NodeName=gpu-node-017 State=DRAIN Reason=ncclbot-gpu-xid-79" in text
    assert "GPU has fallen off the bus" in text


def test_control_characters_never_reach_the_terminal() -> None:
    text = render(runbooks.render_for("cuda/oom", {"culprit_host": "evil\x1b]0;pwned\x07\x1b[2J"}))
    assert "\x1b" not in text and "\x07" not in text


def test_long_command_is_wrapped_with_continuations() -> None:
    command = (
        "srun -N 2 -w gpu-node-017,gpu-node-018 --ntasks-per-node=8 --gpus-per-node=8 "
        "--mpi=pmix all_reduce_perf -b 8"
    )
    lines = wrap_command(command, 50)
    assert len(lines) > 1
    assert all(line.endswith(" \\") for line in lines[:-1])
    assert all(len(line) <= 50 for line in lines)
    assert shlex.split(unwrap(lines)) == shlex.split(command)


def test_quoted_argument_is_never_split() -> None:
    command = (
        "ssh node 'grep -r . /sys/class/infiniband/*/ports/*/counters/' | grep -E 'link_downed|symbol_error'"
    )
    lines = wrap_command(command, 40)
    assert shlex.split(unwrap(lines)) == shlex.split(command)
    assert any("'grep -r . /sys/class/infiniband/*/ports/*/counters/'" in line for line in lines)


WORD = st.text(alphabet=st.sampled_from("abcXYZ019-_=./:,"), min_size=1, max_size=30)
QUOTED = WORD.map(lambda word: "'" + word.replace("-", " ") + "'")


@given(st.lists(st.one_of(WORD, QUOTED), min_size=1, max_size=25), st.integers(min_value=20, max_value=100))
def test_wrapping_preserves_the_words(words: list[str], width: int) -> None:
    command = " ".join(words)
    assert shlex.split(unwrap(wrap_command(command, width))) == shlex.split(command)


@pytest.mark.parametrize("class_id", sorted(CLASSES))
def test_wrapping_preserves_every_shipped_command(class_id: str) -> None:
    rendered = runbooks.render_for(class_id, {"culprit_host": "a-rather-long-node-name-" + "x" * 30})
    for step in (*rendered.steps, rendered.verify):
        if step.command:
            for width in (40, 80):
                wrapped = unwrap(wrap_command(step.command, width, indent=""))
                assert shlex.split(wrapped) == shlex.split(step.command)
