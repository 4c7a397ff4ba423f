"""The plain-data pickle reader agrees with `pickle` on plain data, and on any other bytes ends with one of
its three answers (refused, corrupt, too large) — never another exception, never a hang."""

from __future__ import annotations

import contextlib
import pickle
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matcher.flight_recorder import unpickle
from matcher.flight_recorder.load import MAX_FIELD_CHARS, DumpFormatError, UnsafeDumpError, load_dump

# No bytes: below protocol 3 pickle itself writes them through a global (`codecs.encode`), and torch's
# dumps hold none.
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)
KEYS = st.none() | st.booleans() | st.integers() | st.text(alphabet=string.printable, max_size=12)
PLAIN = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.tuples(inner, inner)
        | st.tuples(inner)
        | st.dictionaries(KEYS, inner, max_size=6)
    ),
    max_leaves=40,
)
ANSWERS = (unpickle.PickleRefused, unpickle.PickleCorrupt, unpickle.PickleTooLarge)
SMALL = unpickle.Budget(max_ops=100_000, max_memory=16 * 1024**2)


@given(PLAIN | st.binary(max_size=40), st.integers(min_value=0, max_value=5))
@settings(max_examples=400, deadline=None)
def test_plain_data_reads_as_pickle_reads_it(value: Any, protocol: int) -> None:
    if isinstance(value, bytes) and protocol < 3:
        protocol = 3
    data = pickle.dumps(value, protocol=protocol)
    assert unpickle.loads(data) == pickle.loads(data)


@given(PLAIN, st.data())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_damaged_pickles_end_with_one_of_three_answers(value: Any, data: st.DataObject) -> None:
    raw = bytearray(
        pickle.dumps({"version": "2.4", "entries": [value]}, protocol=data.draw(st.sampled_from([2, 4])))
    )
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        position = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
        raw[position] = data.draw(st.integers(min_value=0, max_value=255))
    cut = data.draw(st.integers(min_value=1, max_value=len(raw)))
    with contextlib.suppress(*ANSWERS):
        unpickle.loads(bytes(raw[:cut]), SMALL)


@given(st.binary(max_size=400))
@settings(max_examples=400, deadline=None)
def test_random_bytes_after_a_pickle_header_end_with_one_of_three_answers(tail: bytes) -> None:
    with contextlib.suppress(*ANSWERS):
        unpickle.loads(b"\x80\x02" + tail, SMALL)


@given(st.binary(max_size=400))
@settings(max_examples=200, deadline=None)
def test_the_loader_answers_any_bytes_with_a_dump_or_an_input_error(tail: bytes) -> None:
    for head in (b"\x80\x02", b"\x80\x04\x95", b"{", b"\x1f\x8b"):
        with contextlib.suppress(DumpFormatError, UnsafeDumpError):
            load_dump(head + tail, "nccl_trace_rank_0")


def test_every_real_sample_dump_reads_as_pickle_reads_it(shared_dir: Path) -> None:
    dumps = sorted((shared_dir / "fr-samples").glob("*/_dump_*"))
    assert len(dumps) == 64
    for path in dumps:
        raw = path.read_bytes()
        assert unpickle.loads(raw) == pickle.loads(raw), path.name


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_a_global_is_named_in_the_refusal_in_every_protocol(protocol: int) -> None:
    with pytest.raises(unpickle.PickleRefused, match=r"builtin(s|__)\.print"):
        unpickle.loads(pickle.dumps([print], protocol=protocol))


SMALL_INTS = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FIELDS = st.recursive(
    st.none() | st.booleans() | SMALL_INTS | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(FIELDS)
@settings(max_examples=400, deadline=None)
def test_a_field_reads_as_its_repr_up_to_the_limit(value: Any) -> None:
    """Entries are compared across ranks by these texts: below the limit they are exactly `repr`."""
    dump = pickle.dumps({"version": "2.4", "entries": [{"input_sizes": value}]}, protocol=2)
    text = load_dump(dump, "nccl_trace_rank_0").entries[0].input_sizes
    expected = value if isinstance(value, str) else repr(value)
    if len(expected) <= MAX_FIELD_CHARS - 1:
        assert text == expected
    else:
        assert len(text) == MAX_FIELD_CHARS and text.endswith("…") and expected.startswith(text[:-1])
