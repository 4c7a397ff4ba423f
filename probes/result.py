"""The probe's result: plain dataclasses and their JSON form (one document per probe run).

Stdlib only: the bot imports this to read results without needing torch.
Bandwidth definitions follow nccl-tests (doc/PERFORMANCE.md): algbw = bytes / time and, for allreduce,
busbw = algbw * 2(n-1)/n, both in GB/s (10^9 bytes per second).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

SCHEMA_VERSION = 1

Verdict = Literal["healthy", "degraded", "failed"]
CheckStatus = Literal["pass", "warn", "fail", "skipped"]
VERDICTS: tuple[str, ...] = ("healthy", "degraded", "failed")
CHECK_STATUSES: tuple[str, ...] = ("pass", "warn", "fail", "skipped")


class ResultError(ValueError):
    """A probe result document that does not have the promised shape."""


def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth: bytes moved by the caller per second, in GB/s."""
    if seconds <= 0:
        return 0.0
    return nbytes / seconds / 1e9


def allreduce_busbw_gbps(algbw: float, world_size: int) -> float:
    """Bus bandwidth of an allreduce (nccl-tests): algbw * 2(n-1)/n; 0 for a single rank."""
    if world_size <= 1:
        return 0.0
    return algbw * 2 * (world_size - 1) / world_size


@dataclass(slots=True)
class SizeResult:
    """One message size of the allreduce sweep; `time_us` is the slowest rank's mean per iteration."""

    bytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    correct: bool
    wrong_ranks: list[int] = field(default_factory=list)


@dataclass(slots=True)
class LinkResult:
    """One hop of the ring send/recv pass: `src` sent `bytes` to `dst`, measured on the receiver."""

    src: int
    dst: int
    bytes: int
    time_us: float
    gbps: float
    correct: bool


@dataclass(slots=True)
class RankResult:
    """What one rank reported (or, for a rank that never reported, what is known about it)."""

    rank: int
    time_us: float | None = None
    host: str | None = None
    local_rank: int | None = None
    device: str | None = None
    arrived: bool = True
    finished: bool = True
    phase: str | None = None
    error: str | None = None
    size_time_us: list[float] = field(default_factory=list)
    scheduler_node: str | None = None  # the node name the scheduler gave the rank (SLURMD_NODENAME)
    step: int | None = None  # how many probe phases the rank entered (all ranks go through the same ones)


@dataclass(slots=True)
class Check:
    """One node check: pass / warn / fail / skipped (tool absent) with the evidence that decided it."""

    name: str
    status: CheckStatus
    evidence: str
    host: str | None = None


@dataclass(slots=True)
class ProbeResult:
    verdict: Verdict
    reasons: list[str]
    backend: str
    world_size: int
    host: str
    results: list[SizeResult] = field(default_factory=list)
    ranks: list[RankResult] = field(default_factory=list)
    links: list[LinkResult] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    sku: str | None = None
    baseline_busbw_gbps: float | None = None
    peak_busbw_gbps: float | None = None
    versions: dict[str, str] = field(default_factory=dict)
    duration_s: float | None = None
    launcher: str | None = None
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @property
    def missing_ranks(self) -> list[int]:
        return [r.rank for r in self.ranks if not r.arrived]

    @classmethod
    def from_dict(cls, data: Any) -> ProbeResult:
        """Rebuild a result, validating the contract fields; raises ResultError on a bad document."""
        if not isinstance(data, dict):
            raise ResultError("probe result is not a JSON object")
        for key in ("verdict", "reasons", "backend", "world_size", "host"):
            if key not in data:
                raise ResultError(f"probe result lacks {key!r}")
        if data["verdict"] not in VERDICTS:
            raise ResultError(f"probe result has unknown verdict {data['verdict']!r}")
        try:
            checks = [Check(**c) for c in data.get("checks", [])]
            for check in checks:
                if check.status not in CHECK_STATUSES:
                    raise ResultError(f"check {check.name!r} has unknown status {check.status!r}")
            return cls(
                verdict=data["verdict"],
                reasons=[str(r) for r in data["reasons"]],
                backend=str(data["backend"]),
                world_size=int(data["world_size"]),
                host=str(data["host"]),
                results=[SizeResult(**r) for r in data.get("results", [])],
                ranks=[RankResult(**r) for r in data.get("ranks", [])],
                links=[LinkResult(**r) for r in data.get("links", [])],
                checks=checks,
                hosts=list(data.get("hosts", [])),
                sku=data.get("sku"),
                baseline_busbw_gbps=data.get("baseline_busbw_gbps"),
                peak_busbw_gbps=data.get("peak_busbw_gbps"),
                versions=dict(data.get("versions", {})),
                duration_s=data.get("duration_s"),
                launcher=data.get("launcher"),
                schema_version=int(data.get("schema_version", SCHEMA_VERSION)),
            )
        except TypeError as error:
            raise ResultError(f"probe result has a malformed entry: {error}") from error

    @classmethod
    def from_json(cls, text: str) -> ProbeResult:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ResultError(f"probe output is not JSON: {error}") from error
        return cls.from_dict(data)


def failure(reason: str, *, host: str, launcher: str | None = None, world_size: int = 0) -> ProbeResult:
    """A result for a probe that produced nothing usable (unreachable, refused, timed out...)."""
    return ProbeResult(
        verdict="failed",
        reasons=[reason],
        backend="unknown",
        world_size=world_size,
        host=host,
        hosts=[host],
        launcher=launcher,
    )


def find_result_line(stdout: str) -> ProbeResult | None:
    """The last line of `stdout` that parses as a probe result (rank 0 prints exactly one)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            return ProbeResult.from_json(line)
        except ResultError:
            continue
    return None
