"""Plain-text rendering of a probe result, for a terminal without the bot (the bot renders with rich)."""

from __future__ import annotations

from probes.progress import human_bytes
from probes.result import ProbeResult


def render_text(result: ProbeResult) -> str:
    lines = [
        f"verdict: {result.verdict.upper()}  ({result.backend}, {result.world_size} ranks on "
        f"{', '.join(result.hosts) or result.host})"
    ]
    lines += [f"  - {reason}" for reason in result.reasons]
    if result.results:
        lines.append(f"{'size':>10} {'time_us':>12} {'algbw GB/s':>11} {'busbw GB/s':>11}  correct")
        for size in result.results:
            mark = "yes" if size.correct else f"NO (ranks {', '.join(map(str, size.wrong_ranks))})"
            lines.append(
                f"{human_bytes(size.bytes):>10} {size.time_us:>12.1f} {size.algbw_gbps:>11.3f}"
                f" {size.busbw_gbps:>11.3f}  {mark}"
            )
    for link in result.links:
        state = "ok" if link.correct else "WRONG DATA"
        lines.append(f"ring {link.src} -> {link.dst}: {link.gbps:.3f} GB/s {state}")
    for check in result.checks:
        host = f"[{check.host}] " if check.host else ""
        lines.append(f"check {host}{check.name}: {check.status} - {check.evidence}")
    return "\n".join(lines)
