"""The weekly digest as data: what `bot.services.digest.compose` builds from the store's figures and
what the renderers (`bot.render.digest_*`) turn into Slack blocks, terminal text and a chart.

Log-derived strings (residue templates and example lines, hostnames, fixes people typed) are kept raw
here; renderers make them safe for their medium.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Trend = Literal["new", "up", "down", "flat"]


@dataclass(frozen=True, slots=True)
class ClassLine:
    """Occurrences of one class this period against the period before, and what they cost."""

    class_id: str
    title: str
    count: int
    previous: int
    trend: Trend
    gpu_hours: float

    @property
    def change(self) -> int:
        return self.count - self.previous


@dataclass(frozen=True, slots=True)
class FingerprintLine:
    """The same failure (fingerprint) several times this period; `incident_id` is its latest incident."""

    fingerprint: str
    class_id: str
    count: int
    previous: int
    incidents: int
    incident_id: int
    hosts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LemonLine:
    """A node that keeps initiating incidents or failing probes: a candidate to drain."""

    hostname: str
    cluster: str | None
    score: float
    incidents: int
    failed_probes: int
    probe_runs: int
    incident_id: int | None = None  # its latest incident (the Drain button acts on it)


@dataclass(frozen=True, slots=True)
class CostLine:
    class_id: str
    gpu_hours: float
    occurrences: int
    estimated: int  # occurrences whose cost was known (world size and timeout in the logs)


@dataclass(frozen=True, slots=True)
class ResolveLine:
    """Time from first seen to resolved, for incidents resolved this period (`key` "all" or a class)."""

    key: str
    resolved: int
    median_hours: float


@dataclass(frozen=True, slots=True)
class StaleIncident:
    id: int
    class_id: str
    hosts: tuple[str, ...]
    first_seen: datetime
    occurrences: int
    age_days: int


@dataclass(frozen=True, slots=True)
class FixLine:
    """Resolutions that named this fix: held (no recurrence within the horizon), recurred, pending."""

    fix: str
    held: int
    recurred: int
    pending: int


@dataclass(frozen=True, slots=True)
class CorrectionLine:
    incident_id: int
    given: str
    corrected: str | None
    user: str
    note: str | None = None


@dataclass(frozen=True, slots=True)
class ResidueLine:
    """An unrecognised log template: in how many diagnoses, how many lines, one example as written."""

    template_id: int
    template: str
    occurrences: int
    lines: int
    classes: tuple[str, ...]
    example: str


@dataclass(frozen=True, slots=True)
class Grid:
    """Counts on two axes: `cells[r][c]` for row `rows[r]` and column `columns[c]`."""

    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[tuple[int, ...], ...]

    @property
    def empty(self) -> bool:
        return not any(any(row) for row in self.cells)


@dataclass(frozen=True, slots=True)
class Digest:
    week: str  # ISO week of the digest, "2026-W49"
    channel: str | None
    as_of: datetime  # end of the period
    days: int
    classes: tuple[ClassLine, ...]
    fingerprints: tuple[FingerprintLine, ...]
    lemons: tuple[LemonLine, ...]
    costs: tuple[CostLine, ...]
    resolve: tuple[ResolveLine, ...]
    stale_days: int
    stale: tuple[StaleIncident, ...]
    fixes: tuple[FixLine, ...]
    corrections: tuple[CorrectionLine, ...]
    residue: tuple[ResidueLine, ...]
    weekly: Grid  # rows: classes, columns: week labels, oldest first
    heatmap: Grid  # rows: nodes, columns: classes

    @property
    def total(self) -> int:
        return sum(c.count for c in self.classes)

    @property
    def total_previous(self) -> int:
        return sum(c.previous for c in self.classes)

    @property
    def gpu_hours(self) -> float:
        return sum(c.gpu_hours for c in self.costs)
