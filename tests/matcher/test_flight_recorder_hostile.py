"""Hostile Flight Recorder dumps: a few bytes can describe a cycle, an exponential tree of shared references,
a huge memo index or length, or millions of entries. The loader's cost is bounded by construction
(opcodes, estimated memory, entries, groups, characters per field), so each of these ends quickly with a
clear message or a bounded result. `timeout` marks guard against a hang; memory is measured with
tracemalloc."""

from __future__ import annotations

import contextlib
import gzip
import json
import pickle
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from matcher.flight_recorder import unpickle
from matcher.flight_recorder.analyze import analyze_dumps
from matcher.flight_recorder.load import (
    MAX_ENTRIES,
    MAX_FIELD_CHARS,
    DumpFormatError,
    DumpTooLargeError,
    UnsafeDumpError,
    load_dump,
)
from tests.fixtures.hostile_files import FR_ENTRY as ENTRY
from tests.fixtures.hostile_files import FR_PG_CONFIG as PG_CONFIG
from tests.fixtures.hostile_files import fr_shared_entries


def _peak_mib(action: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        with contextlib.suppress(DumpFormatError):
            action()
        return tracemalloc.get_traced_memory()[1] / 1024**2
    finally:
        tracemalloc.stop()


def _laughs(levels: int) -> list[Any]:
    """2**levels leaves from `levels` shared lists: a few bytes pickled, astronomically large expanded."""
    node: list[Any] = ["lol"]
    for _ in range(levels):
        node = [node, node]
    return node


@pytest.mark.timeout(60)
def test_a_list_that_contains_itself_is_a_format_error_not_a_hang() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    data = pickle.dumps({"version": "2.4", "entries": cycle}, protocol=2)
    assert len(data) < 60
    with pytest.raises(DumpFormatError, match="not a mapping"):
        load_dump(data, "nccl_trace_rank_0")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["input_sizes", "process_group", "profiling_name", "state"])
def test_self_references_and_billion_laughs_in_a_field_cost_only_the_characters_kept(where: str) -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    for hostile in (cycle, _laughs(64)):
        entry = {**ENTRY, where: hostile}
        data = pickle.dumps({"version": "2.4", "entries": [entry], "pg_config": PG_CONFIG}, protocol=2)
        assert len(data) < 1000
        dump = load_dump(data, "nccl_trace_rank_0")
        fields = (
            dump.entries[0].input_sizes,
            dump.entries[0].pg_name,
            dump.entries[0].op,
            dump.entries[0].state,
        )
        assert all(len(text) <= MAX_FIELD_CHARS for text in fields)


@pytest.mark.timeout(60)
def test_billion_laughs_across_entries_and_groups_stays_small() -> None:
    shared_entry = {**ENTRY, "input_sizes": _laughs(64)}
    document = {
        "version": "2.4",
        "entries": [shared_entry] * 2000,
        "pg_config": {str(i): {"name": str(i), "desc": "x", "ranks": "[0, 1]"} for i in range(500)},
    }
    data = pickle.dumps(document, protocol=2)
    peak = _peak_mib(lambda: analyze_dumps([load_dump(data, "nccl_trace_rank_0")]))
    assert peak < 64


def _text_op(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


@pytest.mark.timeout(60)
def test_deep_nesting_in_a_field_is_read_without_recursion() -> None:
    """200,000 nested lists (EMPTY_LIST n times, then APPEND n-1 times): pickle.dumps could not even
    write this, and repr() of it would overflow the stack."""
    depth = 200_000
    deep = b"]" * depth + b"a" * (depth - 1)
    entry = b"}(" + _text_op("input_sizes") + deep + _text_op("state") + _text_op("scheduled") + b"u"
    data = _opcodes(b"}(", _text_op("version"), _text_op("2.4"), _text_op("entries"), b"]", entry, b"au")
    dump = load_dump(data, "nccl_trace_rank_0")
    assert (
        dump.entries[0].input_sizes.startswith("[[[[") and len(dump.entries[0].input_sizes) <= MAX_FIELD_CHARS
    )


def _opcodes(*parts: bytes) -> bytes:
    return b"\x80\x02" + b"".join(parts) + b"."


@pytest.mark.parametrize(
    "data",
    [
        _opcodes(b"X" + struct.pack("<I", 2**32 - 1) + b"abc"),  # declares a 4 GiB string
        _opcodes(b"\x8d" + struct.pack("<Q", 2**62) + b"abc"),  # declares an exabyte
        _opcodes(b"\x8b" + struct.pack("<i", 2**31 - 1)),  # a 2 GiB integer
        _opcodes(b"h\x07"),  # memo slot never stored
        _opcodes(b"}(]K\x01u"),  # a list as a dict key
        _opcodes(b"\xff"),  # no such opcode
    ],
    ids=["huge-str", "huge-str8", "huge-long", "bad-memo", "unhashable-key", "unknown-opcode"],
)
def test_impossible_lengths_and_malformed_opcodes_are_corrupt_not_deep(data: bytes) -> None:
    with pytest.raises(DumpFormatError) as info:
        load_dump(data, "nccl_trace_rank_0")
    assert "corrupt" in str(info.value)
    assert "nests" not in str(info.value)


def test_a_huge_memo_index_costs_one_entry() -> None:
    data = _opcodes(b"}r" + struct.pack("<I", 2**32 - 1) + b"(" + _text_op("entries") + b"]u")
    assert load_dump(data, "nccl_trace_rank_0").entries == ()


@pytest.mark.parametrize(
    ("opcode", "name"),
    [(b"R", "REDUCE"), (b"b", "BUILD"), (b"\x81", "NEWOBJ"), (b"\x82\x01", "EXT1"), (b"Q", "BINPERSID")],
)
def test_every_opcode_that_reaches_code_is_refused_by_name(opcode: bytes, name: str) -> None:
    with pytest.raises(UnsafeDumpError, match=name):
        load_dump(_opcodes(b"N", opcode), "nccl_trace_rank_0")


@pytest.mark.timeout(60)
def test_millions_of_shared_entries_in_a_10_kb_gzip_are_refused_in_bounded_memory() -> None:
    document = fr_shared_entries(3_000_000)
    data = gzip.compress(pickle.dumps(document, protocol=2), 9)
    assert len(data) < 16 * 1024
    with pytest.raises(DumpTooLargeError, match="3,000,000 entries"):
        load_dump(data, "nccl_trace_rank_0")
    assert _peak_mib(lambda: load_dump(data, "nccl_trace_rank_0")) < 128


@pytest.mark.timeout(60)
def test_many_small_objects_stop_at_the_memory_budget() -> None:
    """Under the entry cap, but each entry a fresh dict of fresh lists: the decode budget ends it."""
    entries = [{**ENTRY, "input_sizes": [[i] for i in range(200)]} for i in range(20_000)]
    data = pickle.dumps({"version": "2.4", "entries": entries}, protocol=2)
    with pytest.raises(DumpTooLargeError, match="MiB of memory"):
        load_dump(data, "nccl_trace_rank_0")


@pytest.mark.timeout(60)
def test_a_json_dump_of_tiny_containers_is_refused_before_parsing() -> None:
    text = b'{"version": "2.4", "entries": [' + b"{}," * 20_000_000 + b"{}]}"
    peak = _peak_mib(lambda: load_dump(text, "rank_0.json"))
    with pytest.raises(DumpTooLargeError, match="JSON too large"):
        load_dump(gzip.compress(text), "rank_0.json")
    assert peak < 16  # nothing was parsed: the bound comes from counting brackets


def test_ordinary_dumps_read_the_same_under_every_pickle_protocol(shared_dir: Path) -> None:
    raw = (shared_dir / "fr-samples" / "gpu_error_1st" / "_dump_3").read_bytes()
    reference = pickle.loads(raw)
    assert unpickle.loads(raw) == reference
    loaded = {proto: load_dump(pickle.dumps(reference, protocol=proto), "_dump_3") for proto in range(2, 6)}
    assert len({dump.entries for dump in loaded.values()}) == 1
    assert load_dump(raw, "_dump_3") == loaded[2]
    as_json = json.loads(json.dumps(reference))
    assert load_dump(json.dumps(as_json).encode(), "_dump_3").pg_ranks == loaded[2].pg_ranks


@pytest.mark.timeout(120)
def test_what_a_dump_keeps_is_bounded_by_its_distinct_data() -> None:
    """100,000 entries sharing long fields: the loaded dump keeps each distinct text once, about 200 bytes
    per entry, instead of five 256-character copies per entry."""
    shared = {
        **ENTRY,
        "process_group": ("0", "x" * 200),
        "input_sizes": [[i] for i in range(100)],
        "output_sizes": [[i] for i in range(100)],
        "state": "s" * 200,
    }
    data = pickle.dumps({"version": "2.4", "entries": [shared] * (MAX_ENTRIES - 1)}, protocol=2)
    tracemalloc.start()
    try:
        dump = load_dump(data, "nccl_trace_rank_0")
        kept_mib = tracemalloc.get_traced_memory()[0] / 1024**2
    finally:
        tracemalloc.stop()
    assert len(dump.entries) == MAX_ENTRIES - 1
    assert kept_mib < 48


def test_a_name_with_thousands_of_digits_names_no_rank() -> None:
    data = pickle.dumps({"version": "2.4", "entries": []}, protocol=2)
    assert load_dump(data, "bundle.tar!nccl_trace_rank_" + "9" * 5000).rank is None
    assert load_dump(data, "bundle.tar!nccl_trace_rank_12").rank == 12
