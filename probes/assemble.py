"""Rank 0's coordinator turns what every rank posted on the side channel into one ProbeResult with
sizes, ranks, ring hops, node checks, the per-SKU baseline comparison and a verdict."""

from __future__ import annotations

import os
import time
from typing import Any

from probes.baselines import (
    BaselineError,
    compare_with_baseline,
    find_baseline,
    load_baselines,
    peak_busbw,
    sku_name,
)
from probes.options import ProbeOptions
from probes.result import (
    Check,
    LinkResult,
    ProbeResult,
    RankResult,
    SizeResult,
    algbw_gbps,
    allreduce_busbw_gbps,
)
from probes.verdict import decide


def assemble(
    reports: list[Any],
    *,
    backend: str,
    world: int,
    sizes: list[int],
    host: str,
    deadline_s: float | None,
    started: float,
    opts: ProbeOptions,
    device_name: str,
    local_world: int,
    found_versions: dict[str, str],
) -> ProbeResult:
    """Turn the side channel's per-rank reports into a result with a verdict."""
    ranks: list[RankResult] = []
    links: list[LinkResult] = []
    checks: list[Check] = []
    finals: dict[int, dict[str, Any]] = {}
    for report in reports:
        info = report.info or {}
        final = report.final
        if final:
            finals[report.rank] = final
            if final.get("link"):
                links.append(LinkResult(**final["link"]))
        ranks.append(
            RankResult(
                rank=report.rank,
                time_us=final["time_us"] if final else None,
                host=info.get("host"),
                local_rank=info.get("local_rank"),
                device=info.get("device"),
                arrived=report.info is not None,
                finished=final is not None,
                phase=report.phase,
                step=report.step,
                error=report.error,
                size_time_us=final["size_time_us"] if final else [],
                scheduler_node=info.get("scheduler_node"),
            )
        )
        checks.extend(Check(**c) for c in report.checks)
    results: list[SizeResult] = []
    for index, nbytes in enumerate(sizes):
        reported = {r: f for r, f in finals.items() if index < len(f["size_time_us"])}
        if not reported:
            break
        slowest = max(f["size_time_us"][index] for f in reported.values())
        algbw = algbw_gbps(nbytes, slowest / 1e6)
        wrong = sorted(r for r, f in reported.items() if not f["correct"][index])
        results.append(
            SizeResult(nbytes, slowest, algbw, allreduce_busbw_gbps(algbw, world), not wrong, wrong)
        )
    result = ProbeResult(
        verdict="failed",
        reasons=[],
        backend=backend,
        world_size=world,
        host=host,
        results=results,
        ranks=ranks,
        links=sorted(links, key=lambda link: link.dst),
        checks=checks,
        hosts=sorted({r.host for r in ranks if r.host}),
        versions=found_versions,
        duration_s=round(time.monotonic() - started, 3),
        launcher=os.environ.get("NCCLBOT_PROBE_LAUNCHER"),
    )
    result.peak_busbw_gbps = max((r.busbw_gbps for r in results), default=None)
    extra: list[str] = []
    if device_name != "cpu":
        result.sku = sku_name(device_name, local_world)
        try:
            baseline = find_baseline(device_name, local_world, load_baselines(opts.baselines))
        except BaselineError as error:
            baseline = None
            extra.append(str(error))
        if baseline is not None:
            result.baseline_busbw_gbps = baseline.min_busbw_gbps
            peak = peak_busbw([(r.bytes, r.busbw_gbps) for r in results], baseline.min_bytes)
            reason = compare_with_baseline(peak, baseline)
            if reason:
                extra.append(reason)
    else:
        result.sku = f"{local_world}xcpu"
    decide(result, deadline_s=deadline_s, extra_degraded=extra)
    return result
