"""Property tests: whatever the observations or dump bytes, analysis ends in a well-formed answer or a
typed InputError, never a crash."""

from __future__ import annotations

import json
import pickle
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matcher.analysis.analyze import analyze
from matcher.flight_recorder.analyze import FRDump, analyze_dumps, load_dump
from matcher.model import KNOWN_FIELDS, InputError, Line, Observation, ScanResult, SourceSummary, Stats
from matcher.taxonomy import CLASSES

_FIELD_NAMES = sorted(KNOWN_FIELDS)
_SYMPTOMS = [None, "collective-timeout", "missing-rank", "child-failed", "sigabrt", "peer-closed", "odd"]
_values = st.one_of(
    st.integers(-3, 600), st.sampled_from(["0", "7", "ALLREDUCE", "gpu-node-001", "x<1>", ""])
)

lines = st.builds(
    Line,
    source=st.sampled_from(["a.log", "attempt_0/1/stderr.log", "kernel-n1.log"]),
    lineno=st.integers(1, 10_000),
    text=st.text(max_size=40),
    raw=st.text(max_size=40),
    rank=st.one_of(st.none(), st.integers(0, 40)),
    host=st.one_of(st.none(), st.sampled_from(["n0", "n1", "n2"])),
    pid=st.one_of(st.none(), st.integers(1, 5)),
    time=st.one_of(st.none(), st.floats(0, 1e9, allow_nan=False)),
)

observations = st.builds(
    Observation,
    signature=st.sampled_from(["sig-a", "sig-b", "watchdog", "init", "xid"]),
    classes=st.lists(st.sampled_from(sorted(CLASSES)), max_size=2).map(tuple),
    role=st.sampled_from(["root", "cascade", "context"]),
    line=lines,
    fields=st.dictionaries(st.sampled_from(_FIELD_NAMES), _values, max_size=6),
    weight=st.floats(0.05, 2.0),
    symptom=st.sampled_from(_SYMPTOMS),
)

summaries = st.builds(
    SourceSummary,
    name=st.just("a.log"),
    rank=st.one_of(st.none(), st.integers(0, 40)),
    host=st.one_of(st.none(), st.just("n0")),
    lines=st.integers(0, 100),
    bytes=st.integers(0, 1000),
    ranks_seen=st.lists(st.integers(0, 40), max_size=5).map(tuple),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(observations, max_size=40), st.lists(summaries, max_size=3))
def test_analyze_always_returns_a_well_formed_diagnosis(
    obs: list[Observation], sources: list[SourceSummary]
) -> None:
    diagnosis = analyze(ScanResult(tuple(obs), tuple(sources), Stats()), None)
    confidences = [c.confidence for c in diagnosis.diagnoses]
    assert 1 <= len(confidences) <= 5
    assert confidences == sorted(confidences, reverse=True)
    assert all(0.0 <= c <= 1.0 for c in confidences)
    assert all(c.class_id in CLASSES for c in diagnosis.diagnoses)
    assert all(len(c.evidence) <= 5 for c in diagnosis.diagnoses)
    assert (diagnosis.culprit is None) == (diagnosis.no_culprit_reason is not None)
    assert set(diagnosis.facts) <= KNOWN_FIELDS | {"culprit_rank", "culprit_host", "since_progress_ms"}
    stalled = diagnosis.facts.get("since_progress_ms")
    assert stalled is None or (isinstance(stalled, int) and stalled >= 0)
    json.dumps(diagnosis.to_json())


_plain = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8), st.floats(allow_nan=False)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
    ),
    max_leaves=20,
)

_entry = st.fixed_dictionaries(
    {
        "pg_id": st.integers(0, 3),
        "process_group": st.tuples(st.sampled_from(["0", "1"]), st.just("default_pg")),
        "collective_seq_id": st.integers(0, 6),
        "profiling_name": st.sampled_from(["nccl:all_reduce", "nccl:broadcast", "nccl:send 0->1"]),
        "state": st.sampled_from(["scheduled", "started", "completed"]),
        "is_p2p": st.booleans(),
        "time_created_ns": st.integers(0, 10),
        "input_sizes": st.sampled_from([[[4]], [[8]]]),
    }
)

_dump = st.fixed_dictionaries(
    {
        "version": st.just("2.10"),
        "entries": st.lists(_entry, max_size=6),
        "pg_config": st.just({"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}),
        "pg_status": st.dictionaries(
            st.sampled_from(["0", "1"]),
            st.fixed_dictionaries(
                {
                    "last_enqueued_collective": st.integers(-1, 6),
                    "last_completed_collective": st.integers(-1, 6),
                }
            ),
            max_size=2,
        ),
    }
)


@settings(max_examples=150, deadline=None)
@given(_plain, st.booleans())
def test_load_dump_accepts_plain_data_or_says_why(obj: Any, as_json: bool) -> None:
    data = json.dumps(obj).encode() if as_json else pickle.dumps(obj)
    try:
        dump = load_dump(data, "nccl_trace_rank_1")
    except InputError as error:
        assert "nccl_trace_rank_1" in str(error)
    else:
        assert isinstance(dump, FRDump)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_load_dump_survives_arbitrary_bytes(data: bytes) -> None:
    try:
        dump = load_dump(data, "dump_3")
    except InputError as error:
        assert str(error).startswith("dump_3: ")
    else:
        assert dump.name == "dump_3"


@settings(max_examples=100, deadline=None)
@given(st.lists(_dump, min_size=1, max_size=4))
def test_analyze_dumps_names_only_ranks_it_was_given_or_their_groups(dumps: list[dict]) -> None:
    loaded = [load_dump(pickle.dumps(d), f"rank_{i}") for i, d in enumerate(dumps)]
    finding = analyze_dumps(loaded)
    assert set(finding.culprit_ranks) <= {0, 1, 2, 3}
    assert finding.ranks_dumped == tuple(range(len(dumps)))
    assert finding.reason
