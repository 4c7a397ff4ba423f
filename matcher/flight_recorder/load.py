"""Loading one PyTorch Flight Recorder dump (pickle or JSON, optionally gzip-compressed) safely.

Nothing in a dump is ever executed: the unpickler refuses every global, so a hostile pickle can name a
callable but never reach it. The result is plain typed data (`FRDump`) for `matcher.flight_recorder.analyze`.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from matcher.model import InputError

MAX_DUMP_BYTES = 256 * 1024**2
_PLAIN_SCALARS = (str, int, float, bool, type(None), bytes)
_TRAILING_DIGITS = re.compile(r"(\d+)(?:\.[A-Za-z]+)*$")


class DumpFormatError(InputError):
    """A dump that is empty, truncated, too large or not shaped like a Flight Recorder dump.

    A rank that crashed mid-write leaves such a file; callers may skip it and keep the other dumps.
    """


class UnsafeDumpError(InputError):
    """A pickle that references a global (class or callable): refused, never to be skipped silently."""


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


class _PlainDataUnpickler(pickle.Unpickler):
    """Builds only dict/list/tuple/str/int/float/bool/None; any reference to a global is refused."""

    def __init__(self, data: bytes, name: str) -> None:
        super().__init__(io.BytesIO(data))
        self._name = name

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafeDumpError(
            f"{self._name}: refused to load Flight Recorder dump: it references the global "
            f"'{module}.{name}' (only plain data is accepted)"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeDumpError(f"{self._name}: refused to load Flight Recorder dump: it uses persistent ids")


def load_dump(data: bytes, name: str, rank: int | None = None, max_bytes: int = MAX_DUMP_BYTES) -> FRDump:
    """Parse one rank's dump. `rank` overrides what the file name and pg_config suggest."""
    raw = _decompress(data, name, max_bytes)
    obj = _decode(raw, name)
    return _validate(obj, name, rank)


def _decompress(data: bytes, name: str, max_bytes: int) -> bytes:
    if len(data) > max_bytes:
        raise DumpFormatError(f"{name}: Flight Recorder dump larger than {max_bytes} bytes")
    if not data.startswith(b"\x1f\x8b"):
        return data
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise DumpFormatError(f"{name}: corrupt gzip-compressed Flight Recorder dump ({exc})") from None
    if len(out) > max_bytes or inflater.unconsumed_tail:
        raise DumpFormatError(f"{name}: Flight Recorder dump larger than {max_bytes} bytes once decompressed")
    return out


def _decode(raw: bytes, name: str) -> Any:
    stripped = raw.lstrip()
    if not stripped:
        raise DumpFormatError(f"{name}: empty Flight Recorder dump (the rank probably died while writing it)")
    if stripped[:1] in (b"{", b"["):
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError) as exc:
            raise DumpFormatError(f"{name}: unreadable JSON Flight Recorder dump ({exc})") from None
    if raw[:1] != b"\x80":
        raise DumpFormatError(f"{name}: not a Flight Recorder dump (neither pickle nor JSON)")
    try:
        return _PlainDataUnpickler(raw, name).load()
    except UnsafeDumpError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError) as exc:
        raise DumpFormatError(f"{name}: truncated or corrupt Flight Recorder pickle ({exc})") from None
    except (RecursionError, MemoryError):
        raise DumpFormatError(f"{name}: Flight Recorder pickle nests too deeply") from None


def _validate(obj: Any, name: str, rank: int | None) -> FRDump:
    if isinstance(obj, list):  # torch 2.2 wrote a bare list of entries
        obj = {"version": "2.2", "entries": obj}
    if not isinstance(obj, dict) or not isinstance(obj.get("entries"), list):
        raise DumpFormatError(f"{name}: not a Flight Recorder dump (no 'entries' list)")
    _require_plain(obj, name)
    entries = tuple(e for e in (_entry(raw, name) for raw in obj["entries"]) if e is not None)
    pg_ranks, pg_desc = _pg_config(obj.get("pg_config"), name)
    if rank is None:
        rank = _rank_from_name(name)
    if rank is None:
        rank = _rank_from_membership(pg_ranks)
    return FRDump(
        name=name,
        rank=rank,
        version=str(obj.get("version", "")),
        entries=entries,
        pg_ranks=pg_ranks,
        pg_desc=pg_desc,
        pg_status=_pg_status(obj.get("pg_status"), name),
    )


def _require_plain(obj: Any, name: str) -> None:
    """Defence in depth: whatever the decoder produced must be plain containers and scalars."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif not isinstance(item, _PLAIN_SCALARS):
            raise UnsafeDumpError(
                f"{name}: Flight Recorder dump holds a non-plain value ({type(item).__name__})"
            )


def _int(value: Any, default: int = -1) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def _entry(raw: Any, name: str) -> FREntry | None:
    if not isinstance(raw, dict):
        raise DumpFormatError(f"{name}: Flight Recorder entry is not a mapping")
    group = raw.get("process_group")
    if isinstance(group, list | tuple) and group:
        pg_name, pg_desc = str(group[0]), str(group[1]) if len(group) > 1 else ""
    else:  # schema < 2.1 knows only the local pg_id
        pg_name, pg_desc = str(raw.get("pg_id", "")), ""
    profiling = str(raw.get("profiling_name", ""))
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
        input_sizes=repr(raw.get("input_sizes")),
        output_sizes=repr(raw.get("output_sizes")),
        input_dtypes=repr(raw.get("input_dtypes")),
        state=str(raw.get("state", "")),
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
    for key, cfg in raw.items():
        if not isinstance(cfg, dict):
            continue
        members = cfg.get("ranks", "")
        # torch writes the member list as the text "[0, 1, 2]"; JSON copies may hold a real list.
        values = members if isinstance(members, list) else re.findall(r"-?\d+", str(members))
        ranks[str(key)] = tuple(_int(v) for v in values)
        descs[str(key)] = str(cfg.get("desc", ""))
    return ranks, descs


def _pg_status(raw: Any, name: str) -> dict[str, PGStatus]:
    if not isinstance(raw, dict):
        return {}
    status = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            status[str(key)] = PGStatus(
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
