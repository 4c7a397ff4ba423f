"""Building Diagnosis values for store tests (the matcher's plain data, filled in by hand)."""

from __future__ import annotations

from matcher.model import ClassScore, Culprit, Diagnosis, Evidence, FieldValue, Stats


def make_diagnosis(
    class_id: str = "cuda/oom",
    *,
    host: str | None = "gpu-node-017",
    signatures: tuple[str, ...] = ("cuda-oom",),
    ranks: tuple[int, ...] = (3,),
    facts: dict[str, FieldValue] | None = None,
    seen_ranks: int = 0,
    text: str = "torch.OutOfMemoryError: CUDA out of memory",
) -> Diagnosis:
    evidence = tuple(
        Evidence(source=f"rank{ranks[0] if ranks else 0}.log", line=100 + i, text=text, signature=s)
        for i, s in enumerate(signatures)
    )
    culprit = Culprit(ranks=ranks, hosts=(host,), reason="first failure") if host else None
    return Diagnosis(
        diagnoses=(ClassScore(class_id=class_id, confidence=0.9, title=class_id, evidence=evidence),),
        culprit=culprit,
        symptom="collective-timeout",
        stats=Stats(ranks=seen_ranks),
        facts=dict(facts or {}),
    )
