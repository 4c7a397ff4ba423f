"""Per-SKU busbw baselines and the comparison with this fleet's history. Stdlib only.

Defaults come from published nccl-tests numbers (shared/reference/anchors.md): an 8×H100/H200 NVSwitch
node reaches 450–480 GB/s allreduce busbw at large sizes and Azure warns below 400 GB/s; 8×H100 PCIe
without NVSwitch gives 35–45 GB/s; A100 SXM with HDR IB 250–300 GB/s. The table is overridable with a
JSON file (`NCCLBOT_PROBE_BASELINES` or `--baselines`): a list of objects with the Baseline fields.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

# Only sizes at least this large are compared: small messages are latency-bound, not bandwidth-bound.
DEFAULT_MIN_BYTES = 256 << 20
# Below this fraction of the fleet's median for the same SKU a node is degraded.
HISTORY_FRACTION = 0.8
# Fewer previous runs than this are not a fleet distribution.
HISTORY_MIN_RUNS = 3


class BaselineError(ValueError):
    """A baselines file that cannot be used."""


@dataclass(frozen=True, slots=True)
class Baseline:
    """`device` is a regular expression over the GPU name (as torch reports it); `gpus` the GPU count."""

    device: str
    gpus: int
    min_busbw_gbps: float
    note: str = ""
    min_bytes: int = DEFAULT_MIN_BYTES

    def matches(self, device_name: str, gpus: int) -> bool:
        return gpus == self.gpus and re.search(self.device, device_name, re.IGNORECASE) is not None


# Order matters: the first match wins, so the more specific PCIe entry precedes the SXM one.
DEFAULT_BASELINES: tuple[Baseline, ...] = (
    Baseline("H100.*PCIe", 8, 35.0, "8×H100 PCIe without NVSwitch: 35–45 GB/s"),
    Baseline("H100|H200", 8, 400.0, "8×H100/H200 NVSwitch: 450–480 GB/s expected, < 400 warns"),
    Baseline("A100", 8, 250.0, "8×A100 SXM: 250–300 GB/s"),
)


def sku_name(device_name: str, gpus: int) -> str:
    """A stable SKU key for history lookups, e.g. `8xNVIDIA H100 80GB HBM3`."""
    return f"{gpus}x{device_name}"


def load_baselines(path: str | os.PathLike[str] | None = None) -> tuple[Baseline, ...]:
    """The baselines table: from `path`, else `$NCCLBOT_PROBE_BASELINES`, else the defaults."""
    source = path or os.environ.get("NCCLBOT_PROBE_BASELINES")
    if not source:
        return DEFAULT_BASELINES
    try:
        entries = json.loads(Path(source).read_text())
        return tuple(Baseline(**entry) for entry in entries)
    except (OSError, json.JSONDecodeError, TypeError) as error:
        raise BaselineError(f"cannot use baselines file {source}: {error}") from error


def find_baseline(device_name: str, gpus: int, table: tuple[Baseline, ...]) -> Baseline | None:
    return next((entry for entry in table if entry.matches(device_name, gpus)), None)


def peak_busbw(results: list[tuple[int, float]], min_bytes: int) -> float | None:
    """Highest busbw among sizes of at least `min_bytes`; None when the sweep never got that large."""
    eligible = [busbw for nbytes, busbw in results if nbytes >= min_bytes]
    return max(eligible) if eligible else None


def compare_with_baseline(peak: float | None, baseline: Baseline) -> str | None:
    """A degraded reason when the peak is below the baseline, else None."""
    if peak is None or peak >= baseline.min_busbw_gbps:
        return None
    percent = 100 * peak / baseline.min_busbw_gbps
    return (
        f"busbw {peak:.1f} GB/s is {percent:.0f}% of the {baseline.min_busbw_gbps:.0f} GB/s baseline"
        f" ({baseline.note or baseline.device})"
    )


def compare_with_history(peak: float | None, previous: list[float]) -> str | None:
    """A degraded reason when the peak is well below the fleet median of the same SKU, else None."""
    if peak is None or len(previous) < HISTORY_MIN_RUNS:
        return None
    median = statistics.median(previous)
    if median <= 0 or peak >= HISTORY_FRACTION * median:
        return None
    return (
        f"busbw {peak:.1f} GB/s is {100 * peak / median:.0f}% of this fleet's median {median:.1f} GB/s"
        f" over {len(previous)} previous runs of the same SKU"
    )
