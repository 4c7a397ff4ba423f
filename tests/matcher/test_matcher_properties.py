"""Property-based tests: random and mutated log text into the scanner never crashes, never hangs, and
keeps its bookkeeping (line counts, line numbers, field names) consistent."""

from __future__ import annotations

import io
import time

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matcher.reading.read import ReadLimits, Source
from matcher.scanning.catalog import load_catalog
from matcher.scanning.scan import scan

CATALOG = load_catalog()
EXAMPLES = sorted(
    {line for s in CATALOG for example in (*s.match, *s.no_match) for line in example.split("\n")}
)
NOISE = ["\r", "\x1b[31m", "\x1b[0m", "\x00", "\t", "  ", "[rank3]:", "[default0]:", "12: ", "%|██", "\ufffd"]


@st.composite
def mutated_line(draw: st.DrawFn) -> str:
    """A catalog example, cut, spliced with another, or sprinkled with noise and random characters."""
    line = draw(st.sampled_from(EXAMPLES))
    for _ in range(draw(st.integers(0, 4))):
        action = draw(st.sampled_from(["cut", "splice", "insert", "delete", "noise", "repeat"]))
        position = draw(st.integers(0, len(line)))
        if action == "cut":
            line = line[:position]
        elif action == "splice":
            line = line[:position] + draw(st.sampled_from(EXAMPLES))
        elif action == "insert":
            line = line[:position] + draw(st.text(max_size=8)) + line[position:]
        elif action == "delete":
            line = line[:position] + line[position + draw(st.integers(1, 6)) :]
        elif action == "noise":
            line = line[:position] + draw(st.sampled_from(NOISE)) + line[position:]
        else:
            line = line[:position] * draw(st.integers(1, 20))
    return line


log_text = st.lists(st.one_of(mutated_line(), st.text(max_size=120)), max_size=40).map("\n".join)
log_bytes = st.one_of(
    log_text.map(lambda text: text.encode("utf-8", errors="surrogatepass")),
    st.binary(max_size=2000),
    st.tuples(log_text, st.binary(max_size=50)).map(
        lambda pair: pair[0].encode("utf-8", "replace") + pair[1]
    ),
)


def _scan_bytes(data: bytes, block_bytes: int):
    source = Source("fuzz.log", lambda: io.BytesIO(data))
    return scan([source], CATALOG, ReadLimits(block_bytes=block_bytes, max_line_bytes=64 * 1024))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=log_bytes, block_bytes=st.sampled_from([16, 200, 4096, 1 << 20]))
def test_scan_never_crashes_and_keeps_consistent_bookkeeping(data: bytes, block_bytes: int) -> None:
    result = _scan_bytes(data, block_bytes)
    (summary,) = result.sources
    assert result.stats.lines == summary.lines
    assert result.stats.bytes == summary.bytes
    for observation in result.observations:
        signature = CATALOG.by_id(observation.signature)
        assert 1 <= observation.line.lineno <= summary.lines
        assert set(observation.fields) <= signature.fields
        assert observation.role == signature.role


@settings(max_examples=60, deadline=None)
@given(line=mutated_line())
# A line two signatures read, one of them waiting for the next line (an Open MPI record): found by
# hypothesis when the order of the two depended on where a block ended.
@example(line="GPU0\t X \tNV12\tPrimary job  terminated normally, but 1 process returned")
def test_line_count_is_independent_of_block_size(line: str) -> None:
    data = ("\n".join([line] * 5) + "\n").encode("utf-8", errors="surrogatepass")
    small, large = _scan_bytes(data, 16), _scan_bytes(data, 1 << 20)
    assert small.stats.lines == large.stats.lines
    assert [(o.signature, o.line.lineno) for o in small.observations] == [
        (o.signature, o.line.lineno) for o in large.observations
    ]


@settings(max_examples=30, deadline=None)
@given(fragment=st.sampled_from(EXAMPLES), copies=st.integers(50, 400), tail=st.text(max_size=3))
def test_long_repetitive_lines_finish_in_bounded_time(fragment: str, copies: int, tail: str) -> None:
    """Lines made of a keyword-bearing fragment repeated hundreds of times (worst case for lazy
    quantifiers) still go through every candidate signature quickly: each regex has a timeout."""
    line = (fragment * copies)[:60_000] + tail
    started = time.monotonic()
    _scan_bytes((line + "\n" + line[:30_000] + "\n").encode("utf-8", "replace"), 1 << 20)
    assert time.monotonic() - started < 10
