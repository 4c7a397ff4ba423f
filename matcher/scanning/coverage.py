"""The coverage table (`matcher/coverage.toml`): which failure messages of the stack the catalog recognises.

Each row is one wording family of an upstream component (NCCL, PyTorch c10d, launchers, the kernel, the
driver, JIT builders) with the class and role it stands for. `check()` scans every row's line alone and
reports the signatures that matched; `python -m matcher.scanning.coverage` prints the table in Markdown
with a GAP mark where nothing recognises a line with the expected role and class.
"""

from __future__ import annotations

import io
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from matcher.model import Observation
from matcher.reading.read import ReadLimits, iter_sources
from matcher.scanning.catalog import Catalog, load_catalog
from matcher.scanning.scan import scan

COVERAGE_FILE = Path(__file__).resolve().parent.parent / "coverage.toml"


@dataclass(frozen=True, slots=True)
class Row:
    component: str
    source: str
    versions: str
    line: str
    expected_class: str  # "" for a symptom or fact line
    expected_role: str  # "" for a line that needs no signature (an INFO line shown for contrast)


@dataclass(frozen=True, slots=True)
class Checked:
    row: Row
    observations: tuple[Observation, ...]

    @property
    def recognised(self) -> bool:
        """A signature of the expected role names the expected class (or, for a symptom line, no other)."""
        if not self.row.expected_role:
            return True
        wanted = [o for o in self.observations if o.role == self.row.expected_role]
        if not self.row.expected_class:
            return bool(wanted)
        return any(self.row.expected_class in o.classes for o in wanted) or self._by_exit_record(wanted)

    def _by_exit_record(self, wanted: list[Observation]) -> bool:
        """Launcher exit records name their class through the signal they carry (rules.toml exits)."""
        from matcher.analysis.exits import records
        from matcher.analysis.rankmap import build_rank_map

        if not wanted:
            return False
        observations = list(self.observations)
        for record in records(observations, build_rank_map(observations, ())):
            from matcher.rules import rules

            if record.signal and rules().signal_classes.get(record.signal) == self.row.expected_class:
                return True
        return False


def load_rows(path: Path = COVERAGE_FILE) -> list[Row]:
    document = tomllib.loads(path.read_text(encoding="utf-8"))
    return [
        Row(
            component=m["component"],
            source=m["source"],
            versions=m["versions"],
            line=m["line"],
            expected_class=m["class"],
            expected_role=m["role"],
        )
        for m in document["message"]
    ]


def check(rows: list[Row], catalog: Catalog | None = None) -> list[Checked]:
    catalog = catalog or load_catalog()
    limits = ReadLimits()
    checked = []
    for row in rows:
        stdin = io.BytesIO(row.line.encode() + b"\n")
        result = scan(iter_sources(["-"], limits, stdin=stdin), catalog, limits)
        checked.append(Checked(row, result.observations))
    return checked


def markdown(checked: list[Checked]) -> str:
    out = [
        "| component | source (releases) | class | role | recognised by |",
        "|---|---|---|---|---|",
    ]
    for c in checked:
        by = ", ".join(sorted({o.signature for o in c.observations})) or "-"
        mark = "" if c.recognised else "GAP: "
        row = c.row
        out.append(
            f"| {row.component} | {row.source} ({row.versions}) | {row.expected_class or '(symptom)'} "
            f"| {row.expected_role or '-'} | {mark}{by} |"
        )
    return "\n".join(out)


def main() -> int:
    checked = check(load_rows())
    print(markdown(checked))
    gaps = sum(not c.recognised for c in checked)
    print(f"\n{len(checked)} messages, {gaps} not recognised as expected", file=sys.stderr)
    return 1 if gaps else 0


if __name__ == "__main__":
    raise SystemExit(main())
