"""The matcher end to end: paths -> sources -> (scan + Flight Recorder) -> analysis -> Diagnosis.

Sources are consumed as they are produced (archive members stream once), so Flight Recorder dumps are
diverted while the text sources flow on into the scanner.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import BinaryIO

from matcher.analysis.analyze import analyze
from matcher.analysis.redact import redact_diagnosis
from matcher.flight_recorder.analyze import DumpFormatError, FRDump, analyze_dumps, load_dump
from matcher.flight_recorder.load import MAX_DUMP_BYTES
from matcher.model import Diagnosis, InputError, ScanResult
from matcher.reading.read import ReadLimits, Source, iter_sources
from matcher.scanning.catalog import Catalog, load_catalog
from matcher.scanning.scan import scan

log = logging.getLogger("ncclbot.pipeline")


@dataclass(frozen=True, slots=True)
class PipelineResult:
    diagnosis: Diagnosis
    input_digest: str


def diagnose(
    paths: Sequence[str],
    *,
    limits: ReadLimits | None = None,
    stdin: BinaryIO | None = None,
    progress: Callable[[int], None] | None = None,
    catalog: Catalog | None = None,
) -> PipelineResult:
    """Diagnose the logs at `paths` ('-' = stdin). Raises InputError for unusable input."""
    limits = limits or ReadLimits()
    started = time.perf_counter()
    dumps: list[FRDump] = []
    dump_digests: list[tuple[str, str]] = []
    unreadable_dumps: list[DumpFormatError] = []

    def text_sources() -> Iterator[Source]:
        for source in iter_sources(paths, limits, stdin=stdin):
            if source.kind == "flight-recorder":
                dump = _load_flight_recorder(source, dump_digests, unreadable_dumps)
                if dump is not None:
                    dumps.append(dump)
            else:
                yield source

    scanned = scan(text_sources(), catalog or load_catalog(), limits, progress)
    if unreadable_dumps and not dumps and not scanned.sources:
        # Nothing but unreadable dumps: that is unusable input, not an `unknown` diagnosis.
        first = unreadable_dumps[0]
        more = (
            f" (and {len(unreadable_dumps) - 1} more unreadable dumps)" if len(unreadable_dumps) > 1 else ""
        )
        raise InputError(f"{first}{more}")
    finding = analyze_dumps(dumps) if dumps else None
    # Evidence is printed, stored and posted: credentials echoed into a log stop here.
    diagnosis = redact_diagnosis(analyze(scanned, finding))
    stats = replace(diagnosis.stats, seconds=time.perf_counter() - started)
    diagnosis = replace(diagnosis, stats=stats)
    return PipelineResult(diagnosis=diagnosis, input_digest=input_digest(scanned, dump_digests))


def _load_flight_recorder(
    source: Source, digests: list[tuple[str, str]], unreadable: list[DumpFormatError]
) -> FRDump | None:
    """A crashed rank often leaves an empty or cut dump, and a hostile one may be too large to read: that
    one is skipped with a warning, the others still count. A dump that tries to run code
    (UnsafeDumpError) fails the whole diagnosis."""
    with source.opener() as stream:
        data = stream.read(MAX_DUMP_BYTES + 1)
    digests.append((source.name, hashlib.sha256(data).hexdigest()))
    try:
        return load_dump(data, source.name, rank=source.rank)
    except DumpFormatError as error:
        log.warning("%s", error)
        unreadable.append(error)
        return None


def input_digest(scanned: ScanResult, dumps: Sequence[tuple[str, str]] = ()) -> str:
    """A stable identity of the input for idempotent storing, without a second pass over the bytes:
    each source's name, size, line count and content digest (its first and last bytes), and each Flight
    Recorder dump's name and hash. It does not depend on the signatures, so re-running the same logs with
    a newer catalog is still the same occurrence."""
    canonical = {
        "sources": [[s.name, s.bytes, s.lines, s.content_digest] for s in scanned.sources],
        "flight_recorder": sorted(dumps),
    }
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()
