"""Signature catalog: load `matcher/signatures/*.toml`, validate every entry, compile its pattern.

The file format is described in the catalog-format brief (one `[[signature]]` table per signature).
Validation is strict because signature ids end up in fingerprints and field names in runbooks: any
problem raises `CatalogError` naming the file and the signature id, so a bad edit fails loudly at load
time (and in tests) rather than silently matching nothing in production.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import regex

from matcher.model import KNOWN_FIELDS, FieldValue, InputError, Role
from matcher.scanning import catalog_cache
from matcher.taxonomy import CLASSES, UNKNOWN

DEFAULT_DIRECTORY = Path(__file__).resolve().parent.parent / "signatures"

ROLES: frozenset[str] = frozenset({"root", "cascade", "context"})
MAX_WEIGHT = 2.0
MAX_AFTER = 40

# Fields whose values are numbers when they look like one; the rest stay strings (a device may be a bus id,
# a signal may be a name, an error code may be an errno name).
INT_FIELDS: frozenset[str] = frozenset(
    {
        "rank",
        "local_rank",
        "pg_rank",
        "pid",
        "code_line",
        "seqnum",
        "numel_in",
        "numel_out",
        "timeout_ms",
        "elapsed_ms",
        "last_enqueued",
        "last_completed",
        "last_started",
        "port",
        "xid",
        "exit_code",
        "signal",
        "error_code",
        "vendor_err",
        "gid_index",
        "world_size",
        "other_rank",
        "task",
        "bytes",
        "comm_ranks",
    }
)

_ID = regex.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_SYMPTOM = _ID
_KEYS: frozenset[str] = frozenset(
    {
        "id",
        "classes",
        "role",
        "weight",
        "symptom",
        "keywords",
        "caseless",
        "pattern",
        "after",
        "description",
        "match",
        "no_match",
        "expect",
        "read",
    }
)
# How the scanner looks for a signature: "scan", on every line its keywords occur in; "tail", only in the
# last TAIL_BYTES of each source (matcher.scanning.source_scan), for records printed on every step whose
# last values are what counts (NCCL's COLL records: which collective each process reached last). A tail
# signature's keywords never enter the prefilter, so a log full of them costs the scan nothing.
READS: frozenset[str] = frozenset({"scan", "tail"})


class CatalogError(InputError):
    """A signature file is malformed; the message names the file and the signature id."""


@dataclass(frozen=True, slots=True)
class Signature:
    id: str
    classes: tuple[str, ...]
    role: Role
    keywords: tuple[str, ...]
    # The regex source; `pattern` compiles it on first use (a run needs only the few signatures whose
    # keywords occur, and compiling all ~200 patterns would be most of the start-up time).
    pattern_source: str
    file: str
    weight: float = 1.0
    symptom: str | None = None
    caseless: bool = False
    after: int = 0
    description: str = ""
    match: tuple[str, ...] = ()
    no_match: tuple[str, ...] = ()
    expect: Mapping[str, str] = field(default_factory=dict)
    read: str = "scan"

    @property
    def pattern(self) -> regex.Pattern[str]:
        return compile_pattern(self.pattern_source, self.caseless)

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(self.pattern.groupindex)


@dataclass(frozen=True, slots=True)
class Catalog:
    signatures: tuple[Signature, ...]
    files: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Signature]:
        return iter(self.signatures)

    def __len__(self) -> int:
        return len(self.signatures)

    def by_id(self, signature_id: str) -> Signature:
        for signature in self.signatures:
            if signature.id == signature_id:
                return signature
        raise KeyError(signature_id)

    def classes_without_root(self) -> list[str]:
        """TAXONOMY classes (except unknown) that no `root` signature supports."""
        rooted = {c for s in self.signatures if s.role == "root" for c in s.classes}
        return sorted(c for c in CLASSES if c != UNKNOWN and c not in rooted)


@functools.lru_cache(maxsize=4096)
def compile_pattern(source: str, caseless: bool) -> regex.Pattern[str]:
    """A signature pattern, compiled once per process (raises `regex.error` when it does not compile)."""
    return regex.compile(source, regex.IGNORECASE if caseless else 0)


def convert_fields(groups: Mapping[str, str | None]) -> dict[str, FieldValue]:
    """Named-group values -> observation fields: unmatched groups dropped, numeric fields as int."""
    fields: dict[str, FieldValue] = {}
    for name, value in groups.items():
        if value is None or value == "":
            continue
        if name in INT_FIELDS:
            try:
                fields[name] = int(value)
                continue
            except ValueError:
                pass
        fields[name] = value
    return fields


_default: Catalog | None = None
_SIGNATURE_FIELDS = tuple(f.name for f in dataclasses.fields(Signature))


def load_catalog(directory: str | Path | None = None) -> Catalog:
    """Load and validate every `*.toml` in `directory` (default: the packaged `matcher/signatures`,
    loaded once per process: the catalog is immutable and a long-running service diagnoses many logs)."""
    global _default
    if directory is None:
        if _default is None:
            _default = load_cached(DEFAULT_DIRECTORY, catalog_cache.cache_directory())
        return _default
    return _load(Path(directory))


def load_cached(root: Path, cache_dir: Path | None) -> Catalog:
    """The catalog in `root`, validated once per distinct content and then read back from `cache_dir`
    (see `matcher.scanning.catalog_cache`); patterns then compile only when first used."""
    paths = sorted(root.glob("*.toml"))
    try:
        parts = [part for path in paths for part in (path.name.encode(), path.read_bytes())]
    except OSError:
        return _load(root)  # let the normal load name the unreadable file
    parts += [
        Path(__file__).read_bytes(),  # the validation rules themselves
        repr(sorted(CLASSES)).encode(),
        repr(sorted(KNOWN_FIELDS)).encode(),
        f"{regex.__version__} {sys.version}".encode(),
    ]
    fresh: list[Catalog] = []

    def build() -> dict[str, Any]:
        fresh.append(_load(root))
        return {
            "files": list(fresh[0].files),
            "signatures": [dataclasses.asdict(signature) for signature in fresh[0].signatures],
        }

    stored = catalog_cache.cached("catalog", catalog_cache.digest(parts), build, cache_dir)
    if fresh:
        return fresh[0]
    try:
        return Catalog(
            signatures=tuple(_signature_from_record(record) for record in stored["signatures"]),
            files=tuple(stored["files"]),
        )
    except (KeyError, TypeError):  # a damaged cache entry: load normally
        return _load(root)


def _signature_from_record(record: dict[str, Any]) -> Signature:
    # JSON turned the tuples into lists.
    values: dict[str, Any] = {
        name: tuple(record[name]) if isinstance(record[name], list) else record[name]
        for name in _SIGNATURE_FIELDS
    }
    return Signature(**values)


def _load(root: Path) -> Catalog:
    paths = sorted(root.glob("*.toml"))
    if not paths:
        raise CatalogError(f"no signature files (*.toml) in {root}")
    signatures: list[Signature] = []
    seen: dict[str, str] = {}
    for path in paths:
        for signature in load_file(path):
            if signature.id in seen:
                raise CatalogError(
                    f"{path.name}: signature {signature.id!r}: duplicate id (also in {seen[signature.id]})"
                )
            seen[signature.id] = path.name
            signatures.append(signature)
    return Catalog(signatures=tuple(signatures), files=tuple(p.name for p in paths))


def load_file(path: Path) -> list[Signature]:
    import tomllib  # only when the catalog is not cached: a few ms of every start-up otherwise

    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise CatalogError(f"{path.name}: cannot read signature file: {error}") from None
    unexpected = set(document) - {"signature"}
    if unexpected:
        raise CatalogError(
            f"{path.name}: unexpected top-level keys {sorted(unexpected)} (only [[signature]])"
        )
    tables = document.get("signature", [])
    if not isinstance(tables, list) or not tables:
        raise CatalogError(f"{path.name}: no [[signature]] tables")
    result: list[Signature] = []
    ids_in_file: set[str] = set()
    for index, table in enumerate(tables):
        signature = _build(path.name, index, table)
        if signature.id in ids_in_file:
            raise CatalogError(f"{path.name}: signature {signature.id!r}: duplicate id")
        ids_in_file.add(signature.id)
        result.append(signature)
    return result


def _build(file: str, index: int, table: Any) -> Signature:
    raw_id = table.get("id") if isinstance(table, dict) else None
    where = f"{file}: signature {raw_id!r}" if isinstance(raw_id, str) else f"{file}: signature #{index + 1}"

    def fail(message: str) -> CatalogError:
        return CatalogError(f"{where}: {message}")

    if not isinstance(table, dict):
        raise fail("is not a table")
    unknown_keys = set(table) - _KEYS
    if unknown_keys:
        raise fail(f"unknown keys {sorted(unknown_keys)}")
    if not isinstance(raw_id, str) or not _ID.fullmatch(raw_id):
        raise fail("id must be a kebab-case string")

    classes = _strings(table.get("classes"), "classes", fail)
    for class_id in classes:
        if class_id not in CLASSES or class_id == UNKNOWN:
            raise fail(f"unknown class {class_id!r}")
    if len(set(classes)) != len(classes):
        raise fail("classes repeat")

    role = table.get("role")
    if role not in ROLES:
        raise fail(f"bad role {role!r} (root | cascade | context)")
    if role == "root" and not classes:
        raise fail("a root signature must name at least one class")

    weight = table.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= MAX_WEIGHT:
        raise fail(f"weight must be a number in (0, {MAX_WEIGHT}]")

    symptom = table.get("symptom")
    if symptom is not None:
        if role != "cascade":
            raise fail("symptom is only for cascade signatures")
        if not isinstance(symptom, str) or not _SYMPTOM.fullmatch(symptom):
            raise fail("symptom must be a kebab-case string")

    caseless = table.get("caseless", False)
    if not isinstance(caseless, bool):
        raise fail("caseless must be true or false")

    after = table.get("after", 0)
    if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= MAX_AFTER:
        raise fail(f"after must be an integer in [0, {MAX_AFTER}]")

    read = table.get("read", "scan")
    if read not in READS:
        raise fail(f"read must be one of {sorted(READS)}")
    if read == "tail" and (role != "context" or after or caseless):
        raise fail('read = "tail" is for single-line, case-sensitive context signatures')

    description = table.get("description", "")
    if not isinstance(description, str) or not description.strip():
        raise fail("description must be a non-empty string")

    keywords = _strings(table.get("keywords"), "keywords", fail)
    if not keywords:
        raise fail("needs at least one keyword")
    if any(not k.strip() for k in keywords):
        raise fail("empty keyword")

    source = table.get("pattern")
    if not isinstance(source, str) or not source:
        raise fail("pattern must be a non-empty string")
    try:
        pattern = compile_pattern(source, caseless)
    except regex.error as error:
        raise fail(f"pattern does not compile: {error}") from None
    if pattern.fullmatch("") is not None:
        raise fail("pattern matches the empty string (it would match every candidate line)")
    unknown_fields = set(pattern.groupindex) - KNOWN_FIELDS
    if unknown_fields:
        raise fail(f"unknown fields {sorted(unknown_fields)} (see matcher.model.KNOWN_FIELDS)")

    match = _strings(table.get("match"), "match", fail)
    no_match = _strings(table.get("no_match"), "no_match", fail)
    if not match:
        raise fail("missing match examples")
    if not no_match:
        raise fail("missing no_match examples")
    for example in match:
        if not _has_keyword(example, keywords, caseless):
            raise fail(f"no keyword occurs in match example {example!r}")

    expect = table.get("expect", {})
    if not isinstance(expect, dict):
        raise fail("expect must be a table")
    for name, value in expect.items():
        if name not in pattern.groupindex:
            raise fail(f"expect names {name!r}, which the pattern does not capture")
        if not isinstance(value, str | int):
            raise fail(f"expect.{name} must be a string or an integer")

    return Signature(
        id=raw_id,
        classes=tuple(classes),
        role=cast(Role, role),
        keywords=tuple(keywords),
        pattern_source=source,
        file=file,
        weight=float(weight),
        symptom=symptom,
        caseless=caseless,
        after=after,
        description=description.strip(),
        match=tuple(match),
        no_match=tuple(no_match),
        expect={k: str(v) for k, v in expect.items()},
        read=read,
    )


def _strings(value: Any, key: str, fail: Callable[[str], CatalogError]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(f"{key} must be a list of strings")
    return list(value)


def _has_keyword(line: str, keywords: tuple[str, ...] | list[str], caseless: bool) -> bool:
    if caseless:
        folded = line.casefold()
        return any(k.casefold() in folded for k in keywords)
    return any(k in line for k in keywords)


def _first_line(example: str) -> str:
    return example.split("\n", 1)[0]


Extractor = Callable[[Signature, str], Mapping[str, FieldValue] | None]


def _search_pattern(signature: Signature, example: str) -> Mapping[str, FieldValue] | None:
    found = signature.pattern.search(example, timeout=1.0)
    return convert_fields(found.groupdict()) if found is not None else None


def example_problems(signature: Signature, extract: Extractor | None = None) -> list[str]:
    """Check a signature against its own examples.

    A match example is one raw line, or for `after = N` signatures the keyword line followed by up to N
    continuation lines joined with "\\n". The keyword test runs on the first line as written; `extract`
    then says what the signature yields for the example (default: the pattern searched over the raw
    text; the test suite passes the scanner's own line matching, prefix peeling included). A no_match
    example passes when no keyword occurs in it or nothing is extracted. Returns human-readable
    problems, empty when all examples behave.
    """
    run = extract or _search_pattern
    problems: list[str] = []

    def fields_of(example: str) -> Mapping[str, FieldValue] | None:
        first = example.split("\n", 1)[0]
        if not _has_keyword(first, signature.keywords, signature.caseless):
            return None
        return run(signature, example)

    for index, example in enumerate(signature.match):
        found = fields_of(example)
        if found is None:
            problems.append(f"{signature.id}: match example does not match: {_first_line(example)!r}")
            continue
        if index == 0:
            got = {k: str(v) for k, v in found.items()}
            for name, want in signature.expect.items():
                if got.get(name) != want:
                    problems.append(f"{signature.id}: expected {name}={want!r}, extracted {got.get(name)!r}")
    for example in signature.no_match:
        if fields_of(example) is not None:
            problems.append(f"{signature.id}: no_match example matches: {_first_line(example)!r}")
    return problems
