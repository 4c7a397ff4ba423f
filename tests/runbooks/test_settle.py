"""What would settle a guess: shown only for unsure diagnoses, for the classes they list, in order."""

from __future__ import annotations

import runbooks
from bot.render.confidence import confidence_word
from runbooks.settle import GUESS_BELOW, MAX_CLASSES


def test_a_sure_diagnosis_needs_nothing_more() -> None:
    diagnoses = [{"class": "cuda/oom", "confidence": 0.93}, {"class": "network/peer-exit", "confidence": 0.2}]
    assert runbooks.settle_for(diagnoses) == ()


def test_a_guess_lists_what_would_confirm_each_of_its_classes_in_order() -> None:
    diagnoses = [
        {"class": "network/interface-selection", "confidence": 0.23},
        {"class": "unknown", "confidence": 0.12},
        {"class": "shm/dev-shm", "confidence": 0.19},
        {"class": "network/ib-rdma", "confidence": 0.15},
        {"class": "system/memlock", "confidence": 0.1},
    ]
    settle = runbooks.settle_for(diagnoses)
    assert [s.class_id for s in settle] == ["network/interface-selection", "shm/dev-shm", "network/ib-rdma"]
    assert len(settle) == MAX_CLASSES
    assert "Bootstrap" in settle[0].text and "/dev/shm" in settle[1].text
    assert settle[0].to_json()["title"] == runbooks.get("network/interface-selection").title


def test_an_unknown_diagnosis_says_what_to_collect_for_any_class() -> None:
    settle = runbooks.settle_for([{"class": "unknown", "confidence": 0.0}])
    assert [s.class_id for s in settle] == ["unknown"]
    assert "NCCL_DEBUG=INFO" in settle[0].text


def test_the_guess_threshold_is_the_low_confidence_band_every_front_end_shows() -> None:
    at = [{"class": "cuda/oom", "confidence": GUESS_BELOW}]
    below = [{"class": "cuda/oom", "confidence": GUESS_BELOW - 0.01}]
    assert runbooks.settle_for(at) == ()
    assert [s.class_id for s in runbooks.settle_for(below)] == ["cuda/oom"]
    assert confidence_word(GUESS_BELOW - 0.01) == "low" and confidence_word(GUESS_BELOW) == "medium"


def test_unknown_first_is_a_guess_whatever_its_confidence() -> None:
    diagnoses = [
        {"class": "unknown", "confidence": 0.62},
        {"class": "timeout/asymmetric-collectives", "confidence": 0.2},
        {"class": "timeout/rank0-only-work", "confidence": 0.1},
    ]
    settle = runbooks.settle_for(diagnoses)
    assert [s.class_id for s in settle] == ["timeout/asymmetric-collectives", "timeout/rank0-only-work"]


def test_every_shipped_settle_text_says_what_to_collect() -> None:
    for class_id, runbook in runbooks.load_all().items():
        assert any(word in runbook.settle for word in ("Collect", "collect")), class_id
