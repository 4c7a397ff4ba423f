"""The coverage table (matcher/coverage.toml): every failure wording listed there is recognised."""

from __future__ import annotations

import pytest

from matcher.scanning.coverage import Row, check, load_rows, markdown
from matcher.taxonomy import CLASSES

ROWS = load_rows()


def test_the_coverage_table_names_only_taxonomy_classes_and_roles() -> None:
    assert len(ROWS) >= 50
    for row in ROWS:
        assert row.expected_class == "" or row.expected_class in CLASSES, row.line
        assert row.expected_role in ("", "root", "cascade", "context"), row.line
        assert row.source and row.versions and row.component


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.component}:{r.line[:40]}" for r in ROWS])
def test_every_listed_upstream_message_is_recognised_with_its_class_and_role(row: Row) -> None:
    (checked,) = check([row])
    found = sorted({(o.signature, o.role, tuple(o.classes)) for o in checked.observations})
    assert checked.recognised, f"{row.component} {row.source}: {row.line!r} -> {found}"


def test_the_printed_table_marks_a_line_nothing_recognises() -> None:
    unknown = Row(
        component="test",
        source="nowhere",
        versions="-",
        line="a perfectly ordinary line about the weather",
        expected_class="cuda/oom",
        expected_role="root",
    )
    table = markdown(check([unknown, ROWS[0]]))
    assert "GAP: -" in table
    assert table.count("GAP") == 1
