"""Runbooks: what to do for each root-cause class, filled with a diagnosis' own values.

Public interface (used by `ncclbot diagnose` and `ncclbot runbook`):
    load_all() -> dict[str, Runbook]        every runbook, validated, cached
    get(class_id) -> Runbook                 one runbook; UnknownClassError for an unknown id
    render_for(class_id, values) -> RenderedRunbook   filled with Diagnosis.facts
    settle_for(diagnoses) -> tuple[Settle, ...]       what would confirm a guess's classes
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from matcher.model import FieldValue, InputError
from runbooks.fill import fill_runbook
from runbooks.loader import CLASSES_DIR, RunbookError, load_dir
from runbooks.model import DeadEnd, RenderedRunbook, Runbook, Step, Summaries
from runbooks.settle import Settle, what_would_settle

__all__ = [
    "DeadEnd",
    "RenderedRunbook",
    "Runbook",
    "RunbookError",
    "Settle",
    "Step",
    "Summaries",
    "UnknownClassError",
    "get",
    "load_all",
    "render_for",
    "settle_for",
]


class UnknownClassError(InputError):
    """A class id with no runbook (the CLI reports it in one line, exit status 2)."""


@cache
def _shipped() -> dict[str, Runbook]:
    return load_dir(CLASSES_DIR)


def load_all() -> dict[str, Runbook]:
    """Every shipped runbook, validated once per process (a fresh dict each call; Runbooks are frozen)."""
    return dict(_shipped())


def get(class_id: str) -> Runbook:
    runbooks = _shipped()
    if class_id not in runbooks:
        raise UnknownClassError(
            f"no runbook for class {class_id!r}; `ncclbot runbook --list` shows the classes"
        )
    return runbooks[class_id]


def render_for(class_id: str, values: Mapping[str, FieldValue]) -> RenderedRunbook:
    """The class' runbook filled with a diagnosis' facts (missing values read as neutral wording)."""
    return fill_runbook(get(class_id), values)


def settle_for(diagnoses: Sequence[Mapping[str, Any]]) -> tuple[Settle, ...]:
    """For a guess, what would confirm each of its classes (`diagnoses` as in the diagnose JSON)."""
    return what_would_settle(diagnoses, _shipped())
