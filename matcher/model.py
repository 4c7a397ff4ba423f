"""Plain data that crosses the matcher's stage boundaries (read -> scan -> analyze -> Diagnosis).

Every stage is a function over these types; nothing here does I/O. `Diagnosis.to_json()` is the
`ncclbot diagnose --json` contract of DESIGN.md (without `runbook` / `incident`, which later stages add).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from matcher.rules import ANALYSIS_VERSION
from matcher.taxonomy import UNKNOWN

Role = Literal["root", "cascade", "context"]
FieldValue = str | int | float

SCHEMA_VERSION = 1

# Below this primary confidence a diagnosis is a guess ("low" in every front end; it says what would
# settle it and lists the classes an expert checks next): priors claim at most 0.45 (matcher/priors.toml),
# a lone cascade line less. `unknown` leading is a guess whatever its confidence.
GUESS_BELOW = 0.5


def is_guess(class_id: str, confidence: float) -> bool:
    """Whether a diagnosis led by `class_id` at `confidence` is only a guess."""
    return class_id == UNKNOWN or confidence < GUESS_BELOW


# Field names that signatures extract and that the analysis, the runbook templates and the store read.
# A signature may only declare fields from this set (the catalog loader checks it), so the names stay
# one vocabulary across the project.
KNOWN_FIELDS: frozenset[str] = frozenset(
    {
        "rank",  # global rank
        "local_rank",
        "pg_rank",  # rank inside a process group ([Rank N] / [PG ... Rank N])
        "pg",  # process group id / name
        "host",
        "pid",
        "device",  # CUDA device index or GPU bus id
        "seqnum",
        "step",  # training step / iteration number of a progress line
        "optype",
        "numel_in",
        "numel_out",
        "timeout_ms",
        "elapsed_ms",
        "last_enqueued",
        "last_completed",
        "last_started",
        "interface",
        "ip",
        "transport",  # NCCL channel transport: P2P/IPC, SHM/direct/direct, NET/IB/0/GDRDMA, NET/Socket/0
        "port",
        "peer",  # remote host/ip:port or rank named by a transport error
        "xid",
        "nccl_version",
        "cuda_version",
        "driver_version",
        "torch_version",
        "exit_code",
        "signal",
        "error_code",  # e.g. CUDA error number (802), ibv status, errno
        "vendor_err",
        "gid_index",
        "world_size",
        "other_rank",  # second rank of a pair (duplicate GPU, mismatch peer)
        "task",  # Slurm task id
        "job_id",
        "bytes",
        "setting",  # an NCCL_* environment variable NCCL reports ("IB_GID_INDEX")
        "setting_value",  # ... and the value it was set to
        "bar_elapsed",  # elapsed time a tqdm-style progress bar shows ("29:41", "1:02:11")
        "exception",  # a Python exception type ("KeyError", "torch.OutOfMemoryError")
        "code_file",  # the source file of the innermost frame of a traceback
        "code_line",  # ... and its line number
        "op_count",  # NCCL's opCount of a collective on its communicator (hexadecimal, as printed)
        "comm",  # an NCCL communicator's address in its process (tells one process's communicators apart)
        "comm_ranks",  # ... and its size ([nranks=N]; not the job's world size)
        "comm_id",  # an NCCL communicator's id (commId: the same in all its processes)
    }
)


@dataclass(frozen=True, slots=True)
class Line:
    """One log line after decoding and prefix peeling.

    `source` is the display name of the file (archive members as `bundle.tar.gz!attempt_0/3/stderr.log`),
    `lineno` 1-based within that file. `text` has ANSI codes and launcher/log prefixes removed; `raw` is
    the decoded line as written (capped), for evidence excerpts. `time` is epoch seconds when a timestamp
    was recognised (year inferred where the format has none).
    """

    source: str
    lineno: int
    text: str
    raw: str = ""
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    time: float | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    """A signature matched a line: what it means (classes, role) and what it extracted (fields)."""

    signature: str
    classes: tuple[str, ...]
    role: Role
    line: Line
    fields: Mapping[str, FieldValue] = field(default_factory=dict)
    weight: float = 1.0
    # Cascade signatures name the symptom they establish ("collective-timeout", "communicator-aborted",
    # "peer-closed", "sigabrt", "child-failed", ...); None for root and context signatures.
    symptom: str | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    source: str
    line: int
    text: str
    signature: str

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.line, "text": self.text, "signature": self.signature}


@dataclass(frozen=True, slots=True)
class ClassScore:
    """One ranked root-cause hypothesis."""

    class_id: str
    confidence: float
    title: str
    evidence: tuple[Evidence, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "class": self.class_id,
            "confidence": round(self.confidence, 3),
            "title": self.title,
            "evidence": [e.to_json() for e in self.evidence],
        }


@dataclass(frozen=True, slots=True)
class Culprit:
    ranks: tuple[int, ...]
    hosts: tuple[str, ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"ranks": list(self.ranks), "hosts": list(self.hosts), "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Stats:
    bytes: int = 0
    lines: int = 0
    ranks: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "lines": self.lines,
            "ranks": self.ranks,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What the matcher concluded. Pure data; JSON-able through `to_json`.

    `facts` holds the values that make a runbook specific and feed the store: keys from KNOWN_FIELDS
    (`timeout_ms`, `seqnum`, `optype`, `interface`, `nccl_version`, `xid`, `world_size`, ...) taken from the
    evidence of the primary class, plus `culprit_host` / `culprit_rank` when a culprit is named, and
    `since_progress_ms` (ms from the last timestamped progress line to the failure) where both are known.
    `no_culprit_reason` says why `culprit` is None when the logs cannot name one.
    """

    diagnoses: tuple[ClassScore, ...]
    culprit: Culprit | None
    symptom: str | None
    stats: Stats
    facts: Mapping[str, FieldValue] = field(default_factory=dict)
    no_culprit_reason: str | None = None
    # The signature catalog + analysis rules that produced this (matcher/analysis-version.toml).
    analysis_version: str = ANALYSIS_VERSION

    @property
    def primary(self) -> ClassScore:
        return self.diagnoses[0]

    @property
    def is_guess(self) -> bool:
        return is_guess(self.primary.class_id, self.primary.confidence)

    @property
    def signature_ids(self) -> tuple[str, ...]:
        """Sorted, de-duplicated signature ids behind the primary class (fingerprint input)."""
        return tuple(sorted({e.signature for e in self.primary.evidence}))

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "analysis_version": self.analysis_version,
            "diagnoses": [d.to_json() for d in self.diagnoses],
            "culprit": self.culprit.to_json() if self.culprit else None,
            "symptom": self.symptom,
            "stats": self.stats.to_json(),
        }


class InputError(Exception):
    """Unusable input (binary, empty, too large once decompressed, hostile archive...).

    The CLI prints `str(error)` as one line and exits with status 2; the message must make sense alone.
    """


@dataclass(frozen=True, slots=True)
class SourceSummary:
    """What the scanner saw of one input file: the analysis uses it for "absence is signal"
    (a rank whose file went quiet early or says nothing) and for the rank count."""

    name: str
    rank: int | None
    host: str | None
    lines: int
    bytes: int
    first_time: float | None = None
    last_time: float | None = None
    ranks_seen: tuple[int, ...] = ()  # ranks attributed to lines of this file (interleaved files hold many)
    # False when the file shows srun starting a launcher per node: its `N: ` task ids then count nodes.
    labels_are_ranks: bool = True
    # Hash of the file's size and its first and last bytes: identifies the input (idempotent storing)
    # without a second pass over gigabytes, and without depending on what the signatures matched.
    content_digest: str = ""


@dataclass(frozen=True, slots=True)
class ScanResult:
    observations: tuple[Observation, ...]
    sources: tuple[SourceSummary, ...]
    stats: Stats


@dataclass(frozen=True, slots=True)
class FRFinding:
    """Flight Recorder verdict over all dumps of one job (`matcher.flight_recorder.analyze.analyze_dumps`).

    `culprit_ranks` empty means the dumps cannot name one; `reason` says why either way.
    """

    ranks_dumped: tuple[int, ...]
    culprit_ranks: tuple[int, ...]
    reason: str
    kind: Literal["missing-ranks", "mismatch", "behind", "all-stuck", "no-issue"]
    pg: str | None = None
    seqnum: int | None = None
    optype: str | None = None
    evidence: tuple[Evidence, ...] = ()
