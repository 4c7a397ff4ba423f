"""Shared helper of the excerpt tests: diagnose a pasted log text the way a user's file would be."""

from __future__ import annotations

from pathlib import Path

from matcher.model import Diagnosis
from matcher.pipeline import diagnose


def diagnose_text(tmp_path: Path, text: str, name: str = "paste.log") -> Diagnosis:
    path = tmp_path / name
    path.write_text(text.lstrip("\n"), encoding="utf-8")
    return diagnose([str(path)]).diagnosis


def class_ids(diagnosis: Diagnosis) -> list[str]:
    return [score.class_id for score in diagnosis.diagnoses]
