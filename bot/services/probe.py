"""Probe suspect node(s): what `ncclbot probe` and the Slack "Run probe" button call.

The verdict is also compared with this fleet's stored history of the same SKU (previous probe runs in
the store), which is the only place the store meets the probe: probes/ itself never imports bot/.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from probes.baselines import compare_with_history
from probes.launchers import KubernetesConfig, SlurmConfig, SshConfig, launch
from probes.options import ProbeOptions
from probes.progress import ProgressCallback
from probes.result import ProbeResult

log = logging.getLogger("ncclbot.services.probe")

HISTORY_DAYS = 90


@dataclass(slots=True)
class LauncherConfigs:
    ssh: SshConfig = field(default_factory=SshConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    k8s: KubernetesConfig = field(default_factory=KubernetesConfig)


def run_probe(
    via: str,
    nodes: Sequence[str],
    opts: ProbeOptions,
    *,
    on_progress: ProgressCallback | None = None,
    timeout: float | None = None,
    launchers: LauncherConfigs | None = None,
    store: bool = True,
    cluster: str | None = None,
    database_url: str | None = None,
) -> ProbeResult:
    """Probe `nodes` together, compare with the fleet's history and store the run: what the CLI and the
    Slack button call. Raises LaunchError only for a request that cannot be attempted (bad node name)."""
    configs = launchers or LauncherConfigs()
    started = datetime.now(UTC)
    result = launch(
        via,
        nodes,
        opts,
        on_progress=on_progress,
        timeout=timeout,
        ssh=configs.ssh,
        slurm=configs.slurm,
        k8s=configs.k8s,
    )
    if store:
        record(
            result,
            nodes=list(nodes) or [result.host],
            cluster=cluster,
            started=started,
            database_url=database_url,
        )
    return result


def fleet_history(store: Any, sku: str | None, exclude_id: int | None = None) -> list[float]:
    """Peak busbw of previous non-failed runs of the same SKU, when the store offers probe runs."""
    if sku is None or not hasattr(store, "probe_runs"):
        return []
    peaks = []
    for run in store.probe_runs(days=HISTORY_DAYS):
        data = run.result
        if run.id == exclude_id or data.get("sku") != sku or data.get("verdict") == "failed":
            continue
        if isinstance(data.get("peak_busbw_gbps"), int | float):
            peaks.append(float(data["peak_busbw_gbps"]))
    return peaks


def apply_history(result: ProbeResult, previous: list[float]) -> None:
    reason = compare_with_history(result.peak_busbw_gbps, previous)
    if reason is None:
        return
    result.reasons.append(reason)
    if result.verdict == "healthy":
        result.verdict = "degraded"


def record(
    result: ProbeResult,
    *,
    nodes: list[str],
    cluster: str | None,
    started: datetime,
    database_url: str | None = None,
) -> None:
    """Compare with the fleet's history and store the run; a missing or broken store only warns."""
    try:
        from bot.store import Store
    except ImportError:
        return
    try:
        with Store.open(database_url) as store:
            apply_history(result, fleet_history(store, result.sku))
            finished = datetime.now(UTC)
            for node in nodes:
                store.record_probe_run(
                    result.to_dict(), node=node, cluster=cluster, started=started, finished=finished
                )
    except Exception as error:  # the verdict matters more than its bookkeeping
        log.warning("probe result not stored: %s", error)
