from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from bot.store import Store
from bot.store.fingerprint import diagnosis_fingerprint, fingerprint, normalise_host
from matcher.analysis import next_checks
from matcher.analysis.next_checks import NextChecks
from tests.matcher.excerpts import diagnose_text
from tests.store.conftest import T0
from tests.store.diagnoses import make_diagnosis


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("gpu-node-017", "gpu-node-017"),
        ("GPU-Node-017", "gpu-node-017"),
        ("gpu-node-017.cluster.local", "gpu-node-017"),
        ("gpu-node-017.", "gpu-node-017"),
        (" gpu-node-017 ", "gpu-node-017"),
        ("10.0.3.17", "10.0.3.17"),
        ("fe80::1", "fe80::1"),
    ],
)
def test_host_normalisation(raw: str, expected: str) -> None:
    assert normalise_host(raw) == expected


def test_digits_are_kept_apart() -> None:
    assert normalise_host("gpu-node-017") != normalise_host("gpu-node-018")
    assert fingerprint("cuda/oom", ["a"], ("gpu-node-017",)) != fingerprint(
        "cuda/oom", ["a"], ("gpu-node-018",)
    )


def test_versioned_sha256() -> None:
    assert re.fullmatch(r"v1:[0-9a-f]{64}", fingerprint("cuda/oom", ["cuda-oom"], ()))


def test_stable_across_order_case_and_domain() -> None:
    one = fingerprint("network/ib-rdma", ["ib-completion", "ib-retry"], ("GPU-NODE-3.example.com",))
    other = fingerprint("network/ib-rdma", ["ib-retry", "ib-completion", "ib-retry"], ("gpu-node-3",))
    assert one == other


def test_every_input_counts() -> None:
    base = fingerprint("cuda/oom", ["cuda-oom"], ("n1",))
    assert fingerprint("system/host-oom", ["cuda-oom"], ("n1",)) != base
    assert fingerprint("cuda/oom", ["cuda-oom", "oom-nccl"], ("n1",)) != base
    assert fingerprint("cuda/oom", ["cuda-oom"], ()) != base


def test_free_text_and_ranks_do_not_count() -> None:
    one = make_diagnosis(text="CUDA out of memory. Tried to allocate 2.00 GiB", ranks=(3,))
    other = make_diagnosis(text="CUDA out of memory. Tried to allocate 7.50 GiB", ranks=(5,))
    assert diagnosis_fingerprint(one) == diagnosis_fingerprint(other)


def test_culprit_host_fact_takes_part() -> None:
    plain = make_diagnosis(host="gpu-node-017")
    with_fact = make_diagnosis(host="gpu-node-017", facts={"culprit_host": "GPU-NODE-017.dc1"})
    assert diagnosis_fingerprint(plain) == diagnosis_fingerprint(with_fact)
    assert diagnosis_fingerprint(make_diagnosis(host=None)) != diagnosis_fingerprint(plain)


XID_13 = (
    "kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=28871, name=python, Graphics SM Warp Exception on "
    "(GPC 1, TPC 0, SM 1): Out Of Range Address\n"
)


def test_next_checks_of_a_guess_leave_its_fingerprint_and_incident_alone(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    filled = diagnose_text(tmp_path, XID_13)
    monkeypatch.setattr(next_checks, "next_checks", lambda: NextChecks(3, 0.5, False, {}))
    bare = diagnose_text(tmp_path, XID_13)
    assert len(filled.diagnoses) > len(bare.diagnoses)  # the guess did list a next check
    assert diagnosis_fingerprint(filled) == diagnosis_fingerprint(bare)
    first = store.record_diagnosis(bare, input_digest="d1", now=T0)
    again = store.record_diagnosis(filled, input_digest="d2", now=T0 + timedelta(hours=1))
    assert (again.id, again.fingerprint, again.occurrences) == (first.id, first.fingerprint, 2)
