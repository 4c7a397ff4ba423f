"""Loading one PyTorch Flight Recorder dump (pickle or JSON, optionally gzip-compressed) safely.

Nothing in a dump is ever executed: pickles are read by `matcher.flight_recorder.unpickle`, which knows
only plain-data opcodes, so a hostile pickle can name a callable but never reach it. The result is plain
typed data (`FRDump`) for `matcher.flight_recorder.analyze`.

What a dump can cost is bounded by construction, whatever it holds:
- bytes: at most MAX_DUMP_BYTES once decompressed;
- decoding: pickles within `Budget` (opcodes, estimated memory); JSON only when an upper bound of the
  objects it can build (from counting its brackets, commas and quotes) is within the same memory budget;
- the result: at most MAX_ENTRIES entries and MAX_GROUPS process groups, every text field cut to
  MAX_FIELD_CHARS by walkers that stop at their budget, so shared references ("billion laughs") and
  self-references cost no more than the characters kept; integers outside 64 bits count as missing.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from matcher.flight_recorder import unpickle
from matcher.model import InputError

MAX_DUMP_BYTES = 64 * 1024**2
# torch's ring buffer holds 2,000 entries by default (TORCH_NCCL_TRACE_BUFFER_SIZE); far more is not a dump.
MAX_ENTRIES = 100_000
MAX_GROUPS = 20_000
MAX_RANKS_TEXT = 4 * 1024**2  # characters of pg_config member lists parsed per dump, all groups together
MAX_FIELD_CHARS = 256
DECODE_BUDGET = unpickle.Budget()
_INT64 = 2**63
# A rank is at most nine digits: an archive member may be named with thousands of them.
_TRAILING_DIGITS = re.compile(r"(?<!\d)(\d{1,9})(?:\.[A-Za-z]+)*$")


class DumpFormatError(InputError):
    """A dump that is empty, truncated, too large or not shaped like a Flight Recorder dump.

    A rank that crashed mid-write leaves such a file; callers may skip it and keep the other dumps.
    """


class UnsafeDumpError(InputError):
    """A pickle that references a global (class or callable): refused, never to be skipped silently."""


class DumpTooLargeError(DumpFormatError):
    """A dump that would cost more than the loader's bounds to read (often a decompression or pickle bomb)."""


@dataclass(frozen=True, slots=True)
class FREntry:
    """One record of a rank's ring buffer, reduced to what cross-rank matching needs."""

    record_id: int
    pg_id: int | None
    pg_name: str
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    is_p2p: bool
    op: str  # profiling_name without the backend prefix: all_reduce, _all_gather_base, send 0->3 ...
    input_sizes: str  # canonical text of the shape lists, compared as a whole
    output_sizes: str
    input_dtypes: str
    state: str  # scheduled | started | completed
    retired: bool
    time_created_ns: int | None


@dataclass(frozen=True, slots=True)
class PGStatus:
    last_enqueued: int
    last_completed: int


@dataclass(frozen=True, slots=True)
class FRDump:
    name: str
    rank: int | None  # global rank: from the file name, else from pg_config membership
    version: str
    entries: tuple[FREntry, ...]
    pg_ranks: Mapping[str, tuple[int, ...]]  # pg name -> global member ranks (pg_config)
    pg_desc: Mapping[str, str]
    pg_status: Mapping[str, PGStatus]  # keyed by the local pg_id, as written by torch


def load_dump(data: bytes, name: str, rank: int | None = None, max_bytes: int = MAX_DUMP_BYTES) -> FRDump:
    """Parse one rank's dump. `rank` overrides what the file name and pg_config suggest."""
    raw = _decompress(data, name, max_bytes)
    obj = _decode(raw, name)
    return _validate(obj, name, rank)


def _decompress(data: bytes, name: str, max_bytes: int) -> bytes:
    if len(data) > max_bytes:
        raise DumpTooLargeError(f"{name}: Flight Recorder dump larger than {max_bytes} bytes")
    if not data.startswith(b"\x1f\x8b"):
        return data
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise DumpFormatError(f"{name}: corrupt gzip-compressed Flight Recorder dump ({exc})") from None
    if len(out) > max_bytes or inflater.unconsumed_tail:
        raise DumpTooLargeError(
            f"{name}: Flight Recorder dump larger than {max_bytes} bytes once decompressed"
        )
    return out


def _decode(raw: bytes, name: str) -> Any:
    stripped = raw.lstrip()
    if not stripped:
        raise DumpFormatError(f"{name}: empty Flight Recorder dump (the rank probably died while writing it)")
    if stripped[:1] in (b"{", b"["):
        return _decode_json(stripped, name)
    if raw[:1] != b"\x80":
        raise DumpFormatError(f"{name}: not a Flight Recorder dump (neither pickle nor JSON)")
    try:
        return unpickle.loads(raw, DECODE_BUDGET)
    except unpickle.PickleRefused as exc:
        raise UnsafeDumpError(
            f"{name}: refused to load Flight Recorder dump: it uses {exc} (only plain data is accepted)"
        ) from None
    except unpickle.PickleTooLarge as exc:
        raise DumpTooLargeError(f"{name}: Flight Recorder pickle too large to read: {exc}") from None
    except unpickle.PickleCorrupt as exc:
        raise DumpFormatError(f"{name}: truncated or corrupt Flight Recorder pickle ({exc})") from None


def _json_memory_bound(text: bytes) -> int:
    """An upper bound of the memory `json.loads` would build: every bracket may open a container, every
    comma or colon add an item, every pair of quotes make a string (counted in C, before parsing)."""
    containers = text.count(b"{") + text.count(b"[")
    items = text.count(b",") + text.count(b":") + containers
    strings = text.count(b'"') // 2
    return 64 * containers + 40 * items + 56 * strings + len(text)


def _decode_json(text: bytes, name: str) -> Any:
    bound = _json_memory_bound(text)
    if bound > DECODE_BUDGET.max_memory:
        raise DumpTooLargeError(
            f"{name}: Flight Recorder JSON too large to read: it could take {bound // 1024**2} MiB of memory "
            f"(limit {DECODE_BUDGET.max_memory // 1024**2} MiB)"
        )
    try:
        return json.loads(text)
    except RecursionError:
        raise DumpFormatError(f"{name}: Flight Recorder JSON nests too deeply") from None
    except ValueError as exc:
        raise DumpFormatError(f"{name}: unreadable JSON Flight Recorder dump ({exc})") from None


def _validate(obj: Any, name: str, rank: int | None) -> FRDump:
    if isinstance(obj, list):  # torch 2.2 wrote a bare list of entries
        obj = {"version": "2.2", "entries": obj}
    if not isinstance(obj, dict) or not isinstance(obj.get("entries"), list):
        raise DumpFormatError(f"{name}: not a Flight Recorder dump (no 'entries' list)")
    raw_entries = obj["entries"]
    if len(raw_entries) > MAX_ENTRIES:
        raise DumpTooLargeError(
            f"{name}: Flight Recorder dump holds {len(raw_entries):,} entries (at most {MAX_ENTRIES:,} "
            "are read; torch's ring buffer holds 2,000 by default)"
        )
    texts = _Texts()
    entries = tuple(_entry(raw, name, texts) for raw in raw_entries)
    pg_ranks, pg_desc = _pg_config(obj.get("pg_config"), name)
    if rank is None:
        rank = _rank_from_name(name)
    if rank is None:
        rank = _rank_from_membership(pg_ranks)
    return FRDump(
        name=name,
        rank=rank,
        version=_text(obj.get("version", "")),
        entries=entries,
        pg_ranks=pg_ranks,
        pg_desc=pg_desc,
        pg_status=_pg_status(obj.get("pg_status"), name),
    )


class _Texts:
    """`_text` with a memory for one dump: a shared reference is converted once, and equal texts are
    kept once, so what a dump's entries retain is bounded by its distinct data (at most the dump's own
    bytes) plus a fixed size per entry, however its entries share or repeat fields."""

    def __init__(self) -> None:
        self._by_id: dict[int, str] = {}
        self._kept: dict[str, str] = {}

    def __call__(self, value: Any) -> str:
        if isinstance(value, str) and len(value) <= MAX_FIELD_CHARS:
            return self._kept.setdefault(value, value)
        # Keyed by identity: valid while the decoded dump is alive, which it is for the whole load.
        known = self._by_id.get(id(value))
        if known is None:
            text = _text(value)
            known = self._by_id[id(value)] = self._kept.setdefault(text, text)
        return known


def _text(value: Any, limit: int = MAX_FIELD_CHARS) -> str:
    """`str(value)` for strings, `repr(value)` for anything else, cut to `limit` characters by a walker
    that stops there: a self-referencing list or a tree of shared references costs `limit`, not its
    expansion (which `repr` would build in full, or recurse into until it fails)."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 1] + "…"
    out: list[str] = []
    size = 0
    for piece in _repr_pieces(value):
        out.append(piece)
        size += len(piece)
        if size >= limit:
            return "".join(out)[: limit - 1] + "…"
    return "".join(out)


def _repr_pieces(value: Any) -> Iterator[str]:
    """The pieces of `repr(value)` for plain data, produced lazily from an explicit stack (no recursion)."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Literal):
            yield item.text
        elif isinstance(item, list | tuple):
            opening, closing = (
                ("[", "]") if isinstance(item, list) else ("(", ",)" if len(item) == 1 else ")")
            )
            yield opening
            stack.append(_Literal(closing))
            for index in range(len(item) - 1, -1, -1):
                stack.append(item[index])
                if index:
                    stack.append(_COMMA)
        elif isinstance(item, dict):
            yield "{"
            stack.append(_Literal("}"))
            pairs = list(item.items())
            for index in range(len(pairs) - 1, -1, -1):
                key, val = pairs[index]
                stack.extend((val, _COLON, key))
                if index:
                    stack.append(_COMMA)
        elif isinstance(item, int) and not isinstance(item, bool) and not -_INT64 <= item < _INT64:
            yield "<huge int>"
        elif isinstance(item, str | bytes) and len(item) > MAX_FIELD_CHARS:
            yield repr(item[:MAX_FIELD_CHARS])
        else:
            yield repr(item)


@dataclass(frozen=True, slots=True)
class _Literal:
    text: str


_COMMA, _COLON = _Literal(", "), _Literal(": ")


def _int(value: Any, default: int = -1) -> int:
    """An int field; a 64-bit counter at most (anything larger, or unreadable, is the default)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and len(value) <= 24:
        try:
            value = int(value)
        except ValueError:
            return default
    if isinstance(value, int) and -_INT64 <= value < _INT64:
        return value
    return default


def _entry(raw: Any, name: str, text: _Texts) -> FREntry:
    if not isinstance(raw, dict):
        raise DumpFormatError(f"{name}: Flight Recorder entry is not a mapping")
    group = raw.get("process_group")
    if isinstance(group, list | tuple) and group:
        pg_name, pg_desc = text(group[0]), text(group[1]) if len(group) > 1 else ""
    else:  # schema < 2.1 knows only the local pg_id
        pg_name, pg_desc = text(raw.get("pg_id", "")), ""
    profiling = text(raw.get("profiling_name", ""))
    op = profiling.split(":", 1)[1] if ":" in profiling else profiling
    is_p2p = bool(raw.get("is_p2p", op.startswith(("send", "recv"))))
    seq = _int(raw.get("collective_seq_id", raw.get("seq_id")))
    created = raw.get("time_created_ns")
    if created is None and raw.get("time_created_us") is not None:
        created = _int(raw["time_created_us"]) * 1000
    return FREntry(
        record_id=_int(raw.get("record_id"), 0),
        pg_id=_int(raw["pg_id"]) if "pg_id" in raw else None,
        pg_name=pg_name,
        pg_desc=pg_desc,
        collective_seq_id=seq,
        p2p_seq_id=_int(raw.get("p2p_seq_id"), 0),
        is_p2p=is_p2p,
        op=op,
        input_sizes=text(raw.get("input_sizes")),
        output_sizes=text(raw.get("output_sizes")),
        input_dtypes=text(raw.get("input_dtypes")),
        state=text(raw.get("state", "")),
        retired=bool(raw.get("retired", False)),
        time_created_ns=_int(created) if created is not None else None,
    )


def _pg_config(raw: Any, name: str) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    ranks: dict[str, tuple[int, ...]] = {}
    descs: dict[str, str] = {}
    if raw is None:
        return ranks, descs
    if not isinstance(raw, dict):
        raise DumpFormatError(f"{name}: Flight Recorder pg_config is not a mapping")
    if len(raw) > MAX_GROUPS:
        raise DumpTooLargeError(
            f"{name}: Flight Recorder pg_config names more than {MAX_GROUPS:,} process groups"
        )
    budget = MAX_RANKS_TEXT
    for key, cfg in raw.items():
        if not isinstance(cfg, dict):
            continue
        members = cfg.get("ranks", "")
        # torch writes the member list as the text "[0, 1, 2]"; JSON copies may hold a real list.
        if isinstance(members, list | tuple):
            budget -= len(members) * 4
            values: list[Any] = list(members) if budget >= 0 else []
        else:
            text = members if isinstance(members, str) else ""
            budget -= len(text)
            values = re.findall(r"-?\d{1,19}", text) if budget >= 0 else []
        if budget < 0:
            raise DumpTooLargeError(f"{name}: Flight Recorder pg_config member lists are too large to read")
        ranks[_text(key)] = tuple(_int(v) for v in values)
        descs[_text(key)] = _text(cfg.get("desc", ""))
    return ranks, descs


def _pg_status(raw: Any, name: str) -> dict[str, PGStatus]:
    if not isinstance(raw, dict):
        return {}
    if len(raw) > MAX_GROUPS:
        raise DumpTooLargeError(
            f"{name}: Flight Recorder pg_status names more than {MAX_GROUPS:,} process groups"
        )
    status = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            status[_text(key)] = PGStatus(
                last_enqueued=_int(value.get("last_enqueued_collective")),
                last_completed=_int(value.get("last_completed_collective")),
            )
    return status


def _rank_from_name(name: str) -> int | None:
    base = re.split(r"[/\\!]", name)[-1]
    match = _TRAILING_DIGITS.search(base)
    return int(match.group(1)) if match else None


def _rank_from_membership(pg_ranks: Mapping[str, tuple[int, ...]]) -> int | None:
    """A rank belongs to every group of its own pg_config: the intersection names it when it is single."""
    common: set[int] | None = None
    for members in pg_ranks.values():
        if members:
            common = set(members) if common is None else common & set(members)
    return next(iter(common)) if common is not None and len(common) == 1 else None
