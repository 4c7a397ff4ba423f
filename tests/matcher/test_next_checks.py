"""A guess lists what an expert checks next (matcher/next_checks.toml); a sure answer lists them far below."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from matcher.analysis import next_checks
from matcher.analysis.next_checks import NEXT_CHECKS_FILE, NextChecks, fill, parse_next_checks
from matcher.model import GUESS_BELOW, ClassScore
from matcher.taxonomy import CLASSES, UNKNOWN, title
from tests.matcher.excerpts import class_ids, diagnose_text

MAX_LISTED = 5
XID_13 = (
    "kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=28871, name=python, Graphics SM Warp Exception on "
    "(GPC 1, TPC 0, SM 1): Out Of Range Address\n"
)
EVICTED = "Status: Failed Reason: Evicted Message: Pod The node had condition: [DiskPressure].\n"


def _scores(*entries: tuple[str, float]) -> tuple[ClassScore, ...]:
    return tuple(ClassScore(cls, confidence, title(cls)) for cls, confidence in entries)


def _document() -> dict[str, Any]:
    return tomllib.loads(NEXT_CHECKS_FILE.read_text(encoding="utf-8"))


def test_every_class_in_the_next_checks_table_is_a_taxonomy_class_and_every_class_has_a_row() -> None:
    table = next_checks.next_checks()
    named = {c for cls, checks in table.rows.items() for c in (cls, *checks)}
    assert named <= set(CLASSES) - {UNKNOWN}
    assert set(table.rows) == set(CLASSES) - {UNKNOWN}  # any guess can be filled
    assert all(len(checks) >= table.wanted - 1 for checks in table.rows.values())


@pytest.mark.parametrize(
    "row",
    [
        {"cuda/oom": ["system/host-oom", "cuda/oops"]},  # not a TAXONOMY class
        {"cuda/oom": ["unknown"]},  # `unknown` is never a next check
        {"cuda/oom": ["cuda/oom", "system/host-oom"]},  # a row naming its own class
        {"cuda/oom": ["system/host-oom", "system/host-oom"]},  # a class twice
        {"cuda/oom": []},
    ],
)
def test_the_next_checks_table_rejects_unknown_classes_self_references_and_repeats(
    row: dict[str, list[str]],
) -> None:
    document = {**_document(), "next": row}
    with pytest.raises(ValueError, match="cuda/oom"):
        parse_next_checks(document)


def test_a_lone_bus_error_guess_also_lists_host_oom() -> None:
    filled = fill(_scores(("shm/dev-shm", 0.41)), MAX_LISTED)
    assert [s.class_id for s in filled] == ["shm/dev-shm", "system/host-oom", "network/interface-selection"]


def test_unknown_first_takes_its_next_checks_from_the_runner_ups_row() -> None:
    ranked = _scores((UNKNOWN, 0.3), ("timeout/asymmetric-collectives", 0.15))
    filled = fill(ranked, MAX_LISTED)
    assert [s.class_id for s in filled] == [
        UNKNOWN,
        "timeout/asymmetric-collectives",
        "timeout/rank0-only-work",
        "timeout/straggler-input",
    ]


def test_an_evicted_pod_names_three_classes_after_unknown(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, EVICTED)
    assert class_ids(d)[0] == UNKNOWN
    assert len([c for c in class_ids(d) if c != UNKNOWN]) == 3
    assert d.culprit is None


def test_a_sure_cuda_oom_diagnosis_lists_its_neighbours_far_below_it(tmp_path: Path) -> None:
    text = (
        "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total "
        "capacity of 79.15 GiB of which 1.12 GiB is free.\n"
    )
    d = diagnose_text(tmp_path, text)
    assert d.primary.confidence >= GUESS_BELOW
    assert class_ids(d)[0] == "cuda/oom" and len(class_ids(d)) == 3
    assert all(
        not s.evidence and s.confidence <= next_checks.next_checks().sure_share * d.primary.confidence + 0.001
        for s in d.diagnoses[1:]
    )
    assert d.culprit is not None and d.culprit.ranks == (2,)


def test_a_guess_naming_two_classes_gets_a_third_without_evidence(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, XID_13)
    assert d.is_guess
    assert class_ids(d) == ["cuda/illegal-access", "hardware/gpu-xid", "nccl/nvls-or-algorithm"]
    assert d.diagnoses[2].evidence == () and all(s.evidence for s in d.diagnoses[:2])


def test_a_bundle_where_nothing_was_read_stays_unknown_alone(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, "epoch 3 done\nsaving to /data/out\n")
    assert class_ids(d) == [UNKNOWN]
    assert d.symptom is None


def test_a_symptom_that_names_no_class_stays_unknown_alone(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, "RuntimeError: CUDA error: invalid argument\n")
    assert class_ids(d) == [UNKNOWN]


def test_next_checks_change_nothing_but_the_tail_of_the_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    filled = diagnose_text(tmp_path, XID_13)
    empty = NextChecks(wanted=3, share=0.5, sure_share=0.0, rows={})
    monkeypatch.setattr(next_checks, "next_checks", lambda: empty)
    bare = diagnose_text(tmp_path, XID_13)
    assert filled.diagnoses[: len(bare.diagnoses)] == bare.diagnoses
    assert len(filled.diagnoses) > len(bare.diagnoses)
    assert (filled.culprit, filled.facts, filled.symptom) == (bare.culprit, bare.facts, bare.symptom)


_CLASS_IDS = sorted(CLASSES)


@given(
    classes=st.lists(st.sampled_from(_CLASS_IDS), min_size=1, max_size=4, unique=True),
    top=st.floats(min_value=0.002, max_value=0.99),
    decay=st.floats(min_value=0.3, max_value=1.0),
)
def test_filling_never_reorders_the_list_and_stays_below_every_listed_class(
    classes: list[str], top: float, decay: float
) -> None:
    ranked = _scores(*((cls, round(top * decay**i, 4)) for i, cls in enumerate(classes)))
    filled = fill(ranked, MAX_LISTED)
    assert filled[: len(ranked)] == ranked
    added = filled[len(ranked) :]
    if added and not (ranked[0].class_id == UNKNOWN or ranked[0].confidence < GUESS_BELOW):
        far_below = next_checks.next_checks().sure_share * ranked[-1].confidence
        assert added[0].confidence <= far_below + 0.001  # a sure answer's neighbours: far below it
    assert len(filled) <= MAX_LISTED and len({s.class_id for s in filled}) == len(filled)
    assert all(s.class_id != UNKNOWN and not s.evidence for s in added)
    shown = [round(s.confidence, 3) for s in filled]  # as `diagnose --json` prints them
    assert all(shown[i] > shown[i + 1] for i in range(len(ranked) - 1, len(filled) - 1))
    assert all(s.confidence < min(r.confidence for r in ranked) for s in added)
