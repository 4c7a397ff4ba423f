"""Read runbooks/classes/*.toml into `Runbook`s and check them against the schema.

The checks are what keeps every runbook usable: one runbook per taxonomy class and none for an unknown
class, no unknown keys, non-empty summaries, an executive summary that stays within its length even when
every value is as long as a value may be, placeholders that name known fields and have wording for a
missing value, commands that parse with `shlex.split` whatever is inserted, and https references.
"""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from matcher.taxonomy import CLASSES, title
from runbooks import template
from runbooks.model import EXECUTIVE_MAX_CHARS, SETTLE_MAX_CHARS, DeadEnd, Runbook, Step, Summaries
from runbooks.values import COMMAND_FALLBACKS, MAX_VALUE_CHARS, PLACEHOLDER_FIELDS, TEXT_FALLBACKS

CLASSES_DIR = Path(__file__).resolve().parent / "classes"

_TOP_KEYS = {"class", "settle", "summaries", "steps", "verify", "dead_ends", "prevention", "references"}
_SUMMARY_KEYS = ("executive", "engineer", "oncall")
_STEP_KEYS = {"title", "command", "expect"}
_DEAD_END_KEYS = {"attempt", "why"}


class RunbookError(ValueError):
    """One or more runbook files break the schema; the message lists every problem found."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


class _Invalid(Exception):
    """One problem in one file (collected into RunbookError)."""


def file_name_for(class_id: str) -> str:
    return class_id.replace("/", "-") + ".toml"


def _text(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(f"{where}: '{key}' must be a non-empty string")
    return value.strip()


def _check_keys(data: Any, allowed: set[str], required: set[str], where: str) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise _Invalid(f"{where}: expected a table")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise _Invalid(f"{where}: unknown key(s) {', '.join(unknown)}")
    missing = sorted(required - set(data))
    if missing:
        raise _Invalid(f"{where}: missing key(s) {', '.join(missing)}")
    return data


def _check_template(text: str, where: str, *, command: bool) -> tuple[template.Segment, ...]:
    try:
        segments = template.parse(text)
        if command:
            template.check_command(segments)
    except template.TemplateError as error:
        raise _Invalid(f"{where}: {error}") from None
    defaults = COMMAND_FALLBACKS if command else TEXT_FALLBACKS
    for placeholder in template.placeholders(segments):
        if placeholder.name not in PLACEHOLDER_FIELDS:
            raise _Invalid(f"{where}: unknown field {{{placeholder.name}}}")
        if placeholder.fallback is None and placeholder.name not in defaults:
            raise _Invalid(
                f"{where}: {{{placeholder.name}}} has no default wording here; "
                f"write {{{placeholder.name}|wording for a missing value}}"
            )
    if command:
        _check_command_parses(segments, where)
    return segments


def _check_command_parses(segments: tuple[template.Segment, ...], where: str) -> None:
    """The command must be valid shell words both with every value missing and with values present."""
    with_fallbacks = template.fill(
        segments,
        lambda p: p.fallback if p.fallback is not None else COMMAND_FALLBACKS[p.name],
    )
    with_values = template.fill(segments, lambda p: shlex.quote("v" * MAX_VALUE_CHARS))
    for rendered in (with_fallbacks, with_values):
        try:
            words = shlex.split(rendered)
        except ValueError as error:
            raise _Invalid(f"{where}: command does not parse with shlex ({error}): {rendered!r}") from None
        if not words:
            raise _Invalid(f"{where}: command is empty")
        try:
            for line in rendered.split("\n"):
                shlex.split(line)
        except ValueError:
            raise _Invalid(f"{where}: a quoted string spans lines; keep each command line whole") from None
        if shlex.split(rendered, comments=True) != words:
            # A shell comment would swallow the rest of a line the renderer breaks with a backslash.
            raise _Invalid(f"{where}: command has a shell comment; explain in 'expect' instead")


def executive_worst_case(segments: tuple[template.Segment, ...]) -> int:
    """Longest possible rendering: every value at MAX_VALUE_CHARS or its fallback, whichever is longer."""
    length = 0
    for segment in segments:
        if isinstance(segment, str):
            length += len(segment)
        else:
            fallback = segment.fallback if segment.fallback is not None else TEXT_FALLBACKS[segment.name]
            length += max(MAX_VALUE_CHARS, len(fallback))
    return length


def _step(data: Any, where: str, *, command_required: bool) -> Step:
    required = {"title", "expect", "command"} if command_required else {"title", "expect"}
    table = _check_keys(data, _STEP_KEYS, required, where)
    step_title = _text(table, "title", where)
    expect = _text(table, "expect", where)
    _check_template(step_title, f"{where}.title", command=False)
    _check_template(expect, f"{where}.expect", command=False)
    command: str | None = None
    if "command" in table:
        command = _text(table, "command", where)
        _check_template(command, f"{where}.command", command=True)
    return Step(title=step_title, command=command, expect=expect)


def _string_list(data: Mapping[str, Any], key: str, where: str) -> list[str]:
    items = data.get(key)
    if not isinstance(items, list) or not items:
        raise _Invalid(f"{where}: '{key}' must be a non-empty list")
    for index, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise _Invalid(f"{where}: {key}[{index}] must be a non-empty string")
    return [item.strip() for item in items]


def _is_https_url(text: str) -> bool:
    if any(char.isspace() for char in text) or "{" in text or "}" in text:
        return False
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return parts.scheme == "https" and bool(parts.hostname) and "." in (parts.hostname or "")


def parse_runbook(data: Any, source: str) -> Runbook:
    """Validate one decoded runbook file (raises _Invalid with the first problem)."""
    table = _check_keys(data, _TOP_KEYS, _TOP_KEYS, source)
    class_id = _text(table, "class", source)
    settle = _text(table, "settle", source)
    if "{" in settle or "}" in settle:
        raise _Invalid(f"{source}: 'settle' is shown for unconfirmed classes and takes no {{placeholders}}")
    if len(settle) > SETTLE_MAX_CHARS:
        raise _Invalid(f"{source}: 'settle' has {len(settle)} characters (limit {SETTLE_MAX_CHARS})")

    summaries_table = _check_keys(
        table["summaries"], set(_SUMMARY_KEYS), set(_SUMMARY_KEYS), f"{source}: summaries"
    )
    summaries = {key: _text(summaries_table, key, f"{source}: summaries") for key in _SUMMARY_KEYS}
    for key, text in summaries.items():
        segments = _check_template(text, f"{source}: summaries.{key}", command=False)
        if key == "executive":
            worst = executive_worst_case(segments)
            if worst > EXECUTIVE_MAX_CHARS:
                raise _Invalid(
                    f"{source}: summaries.executive can reach {worst} characters once filled "
                    f"(limit {EXECUTIVE_MAX_CHARS}, values up to {MAX_VALUE_CHARS} characters)"
                )

    steps_data = table["steps"]
    if not isinstance(steps_data, list) or not steps_data:
        raise _Invalid(f"{source}: 'steps' must be a non-empty list of tables ([[steps]])")
    steps = tuple(
        _step(item, f"{source}: steps[{index}]", command_required=False)
        for index, item in enumerate(steps_data)
    )
    verify = _step(table["verify"], f"{source}: verify", command_required=True)

    dead_ends_data = table["dead_ends"]
    if not isinstance(dead_ends_data, list) or not dead_ends_data:
        raise _Invalid(f"{source}: 'dead_ends' must be a non-empty list of tables ([[dead_ends]])")
    dead_ends = []
    for index, item in enumerate(dead_ends_data):
        where = f"{source}: dead_ends[{index}]"
        entry = _check_keys(item, _DEAD_END_KEYS, _DEAD_END_KEYS, where)
        attempt, why = _text(entry, "attempt", where), _text(entry, "why", where)
        _check_template(attempt, f"{where}.attempt", command=False)
        _check_template(why, f"{where}.why", command=False)
        dead_ends.append(DeadEnd(attempt=attempt, why=why))

    prevention = _string_list(table, "prevention", source)
    for index, item in enumerate(prevention):
        _check_template(item, f"{source}: prevention[{index}]", command=False)

    references = _string_list(table, "references", source)
    for reference in references:
        if not _is_https_url(reference):
            raise _Invalid(f"{source}: reference {reference!r} is not an https URL")

    return Runbook(
        class_id=class_id,
        title=title(class_id),
        summaries=Summaries(**summaries),
        steps=steps,
        verify=verify,
        dead_ends=tuple(dead_ends),
        prevention=tuple(prevention),
        references=tuple(references),
        source=source,
        settle=settle,
    )


def load_dir(
    directory: Path = CLASSES_DIR, class_ids: Collection[str] = tuple(CLASSES)
) -> dict[str, Runbook]:
    """Load and validate every runbook in `directory`; raise RunbookError listing all problems.

    Each class in `class_ids` must have exactly one file named after it (`family-name.toml`), and no
    file may name a class outside `class_ids`.
    """
    problems: list[str] = []
    runbooks: dict[str, Runbook] = {}
    for path in sorted(directory.glob("*.toml")):
        try:
            with path.open("rb") as handle:
                data = tomllib.load(handle)
        except (OSError, tomllib.TOMLDecodeError) as error:
            problems.append(f"{path.name}: cannot read ({error})")
            continue
        try:
            runbook = parse_runbook(data, path.name)
        except _Invalid as problem:
            problems.append(str(problem))
            continue
        if runbook.class_id not in class_ids:
            problems.append(f"{path.name}: runbook for unknown class {runbook.class_id!r}")
        elif path.name != file_name_for(runbook.class_id):
            problems.append(
                f"{path.name}: class {runbook.class_id!r} belongs in {file_name_for(runbook.class_id)}"
            )
        elif runbook.class_id in runbooks:
            problems.append(f"{path.name}: second runbook for {runbook.class_id!r}")
        else:
            runbooks[runbook.class_id] = runbook
    for class_id in class_ids:
        if class_id not in runbooks and not any(file_name_for(class_id) in p for p in problems):
            problems.append(f"class {class_id!r} has no runbook ({file_name_for(class_id)})")
    if problems:
        raise RunbookError(problems)
    return runbooks
