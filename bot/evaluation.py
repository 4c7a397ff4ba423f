"""Accuracy of the matcher on a labelled corpus (`cases.jsonl` + logs, as in shared/corpus-dev).

Each case: `id`, `label` (TAXONOMY id), optional `culprit_rank` / `culprit_host`. The log is `<id>.log`,
`<id>` (file or folder) or `<id>.<ext>` next to cases.jsonl.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matcher.model import Diagnosis, InputError
from matcher.pipeline import diagnose


@dataclass(frozen=True, slots=True)
class CaseResult:
    case_id: str
    label: str
    predicted: tuple[str, ...]  # ranked class ids
    confidence: float
    culprit: str  # agree | wrong | missed | extra | none (see culprit_verdict)
    error: str | None = None

    @property
    def top1(self) -> bool:
        return bool(self.predicted) and self.predicted[0] == self.label

    @property
    def top3(self) -> bool:
        return self.label in self.predicted[:3]


@dataclass(slots=True)
class Report:
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.cases)

    def count(self, predicate: Callable[[CaseResult], bool]) -> int:
        return sum(1 for case in self.cases if predicate(case))

    def confusion(self) -> Counter[tuple[str, str]]:
        return Counter((c.label, c.predicted[0] if c.predicted else "-") for c in self.cases)

    def culprit_counts(self) -> Counter[str]:
        return Counter(c.culprit for c in self.cases)

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.total,
            "top1": self.count(lambda c: c.top1),
            "top3": self.count(lambda c: c.top3),
            "culprit": dict(self.culprit_counts()),
            "confusion": [
                {"label": label, "predicted": predicted, "count": n}
                for (label, predicted), n in sorted(self.confusion().items())
            ],
            "results": [
                {
                    "id": c.case_id,
                    "label": c.label,
                    "predicted": list(c.predicted),
                    "confidence": c.confidence,
                    "culprit": c.culprit,
                    "error": c.error,
                }
                for c in self.cases
            ],
        }


def culprit_verdict(case: dict[str, Any], diagnosis: Diagnosis | None) -> str:
    """agree: names the labelled rank/host; wrong: names another; missed: names none (or names only what the
    label does not give) although the label does; extra: names one where the label has none (not
    necessarily wrong); none: neither names one."""
    want_rank, want_host = case.get("culprit_rank"), case.get("culprit_host")
    culprit = diagnosis.culprit if diagnosis else None
    labelled = want_rank is not None or want_host is not None
    if culprit is None:
        return "missed" if labelled else "none"
    if not labelled:
        return "extra"
    # Compare only what both sides name: a culprit given by host alone is judged on the host.
    checks = []
    if want_rank is not None and culprit.ranks:
        checks.append(want_rank in culprit.ranks)
    if want_host is not None and culprit.hosts:
        checks.append(want_host in culprit.hosts)
    if not checks:
        return "missed"
    return "agree" if all(checks) else "wrong"


def find_log(directory: Path, case_id: str) -> Path:
    for candidate in (directory / f"{case_id}.log", directory / case_id):
        if candidate.exists():
            return candidate
    matches = sorted(directory.glob(f"{case_id}.*"))
    if not matches:
        raise InputError(f"case {case_id}: no log file next to cases.jsonl")
    return matches[0]


def load_cases(directory: Path) -> list[dict[str, Any]]:
    path = directory / "cases.jsonl"
    if not path.is_file():
        raise InputError(f"{directory}: no cases.jsonl (one JSON object per line with id and label)")
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(case, dict) or "id" not in case or "label" not in case:
            raise InputError(f"{path}:{number}: a case needs 'id' and 'label'")
        cases.append(case)
    return cases


def evaluate(directory: Path) -> Report:
    report = Report()
    for case in load_cases(directory):
        case_id, label = str(case["id"]), str(case["label"])
        try:
            diagnosis = diagnose([str(find_log(directory, case_id))]).diagnosis
        except InputError as error:
            report.cases.append(CaseResult(case_id, label, (), 0.0, culprit_verdict(case, None), str(error)))
            continue
        report.cases.append(
            CaseResult(
                case_id,
                label,
                tuple(score.class_id for score in diagnosis.diagnoses),
                diagnosis.primary.confidence,
                culprit_verdict(case, diagnosis),
            )
        )
    return report
