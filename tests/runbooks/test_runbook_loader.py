"""The loader's schema: each rule is shown to reject a runbook built to break it."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from runbooks.loader import RunbookError, file_name_for, load_dir, parse_runbook
from runbooks.model import EXECUTIVE_MAX_CHARS

CLASS_IDS = ("demo/first", "demo/second")


def valid(class_id: str) -> dict[str, Any]:
    return {
        "class": class_id,
        "settle": "A 'thing failed' line on one host. Collect that host's log.",
        "prevention": ["Check the thing before each job."],
        "references": ["https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"],
        "summaries": {
            "executive": "The job stopped on {node|one server}; we are fixing it.",
            "engineer": "Rank {culprit_rank|(not named)} failed first.",
            "oncall": "1) Drain {node}.",
        },
        "steps": [
            {
                "title": "Drain {node}",
                "command": "scontrol update NodeName={node} State=DRAIN",
                "expect": "Drained.",
            },
            {"title": "Decide", "expect": "No command applies here."},
        ],
        "verify": {"title": "Probe", "command": "ncclbot probe {node} --via slurm", "expect": "Healthy."},
        "dead_ends": [{"attempt": "Raising the timeout", "why": "It only delays the failure."}],
    }


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(value)


def to_toml(data: dict[str, Any]) -> str:
    """Enough of a TOML writer for runbook-shaped data (scalars, tables, arrays of tables)."""
    lines: list[str] = []
    tables: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict) or (isinstance(value, list) and value and isinstance(value[0], dict)):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in tables:
        entries = [value] if isinstance(value, dict) else value
        for entry in entries:
            lines.append(f"[{key}]" if isinstance(value, dict) else f"[[{key}]]")
            lines.extend(f"{k} = {_toml_value(v)}" for k, v in entry.items())
    return "\n".join(lines) + "\n"


def write(directory: Path, data: dict[str, Any], name: str | None = None) -> None:
    (directory / (name or file_name_for(data["class"]))).write_text(to_toml(data), encoding="utf-8")


def problems(directory: Path) -> str:
    with pytest.raises(RunbookError) as caught:
        load_dir(directory, CLASS_IDS)
    return str(caught.value)


@pytest.fixture
def good_dir(tmp_path: Path) -> Path:
    for class_id in CLASS_IDS:
        write(tmp_path, valid(class_id))
    return tmp_path


def test_valid_runbooks_load(good_dir: Path) -> None:
    runbooks = load_dir(good_dir, CLASS_IDS)
    assert set(runbooks) == set(CLASS_IDS)
    first = runbooks["demo/first"]
    assert first.steps[1].command is None
    assert first.verify.command == "ncclbot probe {node} --via slurm"


def test_a_class_without_runbook_fails(good_dir: Path) -> None:
    (good_dir / file_name_for("demo/second")).unlink()
    assert "'demo/second' has no runbook" in problems(good_dir)


def test_a_runbook_for_an_unknown_class_fails(good_dir: Path) -> None:
    write(good_dir, valid("demo/third"))
    assert "unknown class 'demo/third'" in problems(good_dir)


def test_a_runbook_in_the_wrong_file_fails(good_dir: Path) -> None:
    (good_dir / file_name_for("demo/second")).unlink()
    write(good_dir, valid("demo/second"), name="second.toml")
    assert "belongs in demo-second.toml" in problems(good_dir)


def test_invalid_toml_is_reported_with_the_file(good_dir: Path) -> None:
    (good_dir / file_name_for("demo/first")).write_text("class = \n", encoding="utf-8")
    assert "demo-first.toml: cannot read" in problems(good_dir)


def test_unknown_field_in_a_placeholder_fails(good_dir: Path) -> None:
    data = valid("demo/first")
    data["summaries"]["engineer"] = "Look at {culprit_hostname}."
    write(good_dir, data)
    assert "unknown field {culprit_hostname}" in problems(good_dir)


def test_unknown_field_in_a_command_fails(good_dir: Path) -> None:
    data = valid("demo/first")
    data["steps"][0]["command"] = "ssh {hostname} ibstat"
    write(good_dir, data)
    assert "unknown field {hostname}" in problems(good_dir)


def test_placeholder_without_any_wording_for_a_missing_value_fails(good_dir: Path) -> None:
    data = valid("demo/first")
    data["summaries"]["engineer"] = "NCCL waited {timeout_min} minutes."
    write(good_dir, data)
    assert "{timeout_min} has no default wording" in problems(good_dir)


@pytest.mark.parametrize("key", ["executive", "engineer", "oncall"])
def test_empty_summary_fails(good_dir: Path, key: str) -> None:
    data = valid("demo/first")
    data["summaries"][key] = "   "
    write(good_dir, data)
    assert f"'{key}' must be a non-empty string" in problems(good_dir)


def test_missing_summary_fails(good_dir: Path) -> None:
    data = valid("demo/first")
    del data["summaries"]["oncall"]
    write(good_dir, data)
    assert "missing key(s) oncall" in problems(good_dir)


def test_executive_over_the_limit_fails(good_dir: Path) -> None:
    data = valid("demo/first")
    data["summaries"]["executive"] = "x" * (EXECUTIVE_MAX_CHARS + 1)
    write(good_dir, data)
    assert "summaries.executive can reach 301" in problems(good_dir)


def test_executive_that_only_overflows_once_values_are_long_fails(good_dir: Path) -> None:
    # 250 characters of text fit, but two host names of up to 64 characters do not.
    data = valid("demo/first")
    data["summaries"]["executive"] = "y" * 250 + "{node|a}{culprit_host|b}"
    write(good_dir, data)
    assert "summaries.executive can reach 378" in problems(good_dir)


def test_executive_whose_fallback_is_long_is_measured_by_the_fallback(good_dir: Path) -> None:
    data = valid("demo/first")
    data["summaries"]["executive"] = "z" * 200 + "{node|" + "w" * 120 + "}"
    write(good_dir, data)
    assert "summaries.executive can reach 320" in problems(good_dir)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("echo 'unterminated", "does not parse with shlex"),
        ('grep "x {node}"', "inside"),
        ("ibstat # check ports", "shell comment"),
        ("python3 -c 'first\nsecond'", "spans lines"),
        ("ssh {node|'} ibstat", "does not parse with shlex"),
    ],
)
def test_bad_commands_fail(good_dir: Path, command: str, message: str) -> None:
    data = valid("demo/first")
    data["steps"][0]["command"] = command
    write(good_dir, data)
    assert message in problems(good_dir)


@pytest.mark.parametrize(
    "reference",
    [
        "http://docs.nvidia.com/x",
        "docs.nvidia.com/x",
        "https://",
        "https://exa mple.com/",
        "ftp://x.org/",
        "https://localhost/",
    ],
)
def test_references_must_be_https_urls(good_dir: Path, reference: str) -> None:
    data = valid("demo/first")
    data["references"] = [reference]
    write(good_dir, data)
    assert "is not an https URL" in problems(good_dir)


def test_verification_needs_a_command(good_dir: Path) -> None:
    data = valid("demo/first")
    del data["verify"]["command"]
    write(good_dir, data)
    assert "verify: missing key(s) command" in problems(good_dir)


@pytest.mark.parametrize("key", ["steps", "dead_ends", "prevention", "references"])
def test_lists_must_not_be_empty(good_dir: Path, key: str) -> None:
    data = valid("demo/first")
    data[key] = []
    write(good_dir, data)
    assert f"'{key}' must be a non-empty list" in problems(good_dir)


def test_unknown_keys_are_refused(good_dir: Path) -> None:
    data = valid("demo/first")
    data["steps"][0]["cmd"] = "ibstat"
    write(good_dir, data)
    assert "unknown key(s) cmd" in problems(good_dir)


def test_every_problem_is_reported_at_once(good_dir: Path) -> None:
    first, second = valid("demo/first"), valid("demo/second")
    first["references"] = ["http://x.org/"]
    second["summaries"]["oncall"] = ""
    write(good_dir, first)
    write(good_dir, second)
    message = problems(good_dir)
    assert "demo-first.toml" in message and "demo-second.toml" in message


def test_the_authoring_example_in_the_readme_is_valid() -> None:
    readme = (Path(__file__).resolve().parents[2] / "runbooks" / "README.md").read_text(encoding="utf-8")
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    runbook = parse_runbook(tomllib.loads(example), "README.md")
    assert runbook.class_id == "hardware/gpu-xid"


def test_a_runbook_without_a_settle_text_fails(good_dir: Path) -> None:
    data = valid("demo/first")
    del data["settle"]
    write(good_dir, data)
    assert "missing key(s) settle" in problems(good_dir)


def test_a_settle_text_with_a_placeholder_fails(good_dir: Path) -> None:
    # It is shown for classes the diagnosis has not confirmed, which have no values to fill.
    data = valid("demo/first")
    data["settle"] = "Look at {node}."
    write(good_dir, data)
    assert "'settle' is shown for unconfirmed classes and takes no {placeholders}" in problems(good_dir)
