"""The weekly digest for a terminal (`ncclbot digest --preview`): the same sections as in Slack, as
plain aligned text. Log-derived strings lose their control characters (no terminal escapes)."""

from __future__ import annotations

from bot.model.digest import Digest, StaleIncident
from bot.render.safe_text import strip_controls

TREND_WORD = {"new": "new", "up": "up", "down": "down", "flat": "="}


def _safe(text: str) -> str:
    return strip_controls(text, keep_newlines=False)


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """`1 incident`, `3 incidents`; `plural` for irregular nouns."""
    return f"{number} {noun}" if number == 1 else f"{number} {plural or noun + 's'}"


def _hosts(hosts: tuple[str, ...]) -> str:
    return ", ".join(_safe(h) for h in hosts) if hosts else "no culprit node"


def trend_text(count: int, previous: int, trend: str) -> str:
    change = count - previous
    return TREND_WORD[trend] if trend in ("new", "flat") else f"{TREND_WORD[trend]} {change:+d}"


def period_line(digest: Digest) -> str:
    end = digest.as_of.strftime("%Y-%m-%d %H:%M UTC")
    return f"{digest.days} days to {end}, against the {digest.days} days before"


def stale_text(incident: StaleIncident) -> str:
    times = counted(incident.occurrences, "occurrence")
    where = _hosts(incident.hosts)
    return f"#{incident.id} {incident.class_id} on {where}: open {incident.age_days} days, {times}"


def digest_text(digest: Digest) -> str:
    out: list[str] = []
    where = f" for {_safe(digest.channel)}" if digest.channel else ""
    out += [f"NCCL incident digest {digest.week}{where}", period_line(digest), ""]

    out.append("Incidents by class                       now  before  trend     GPU-h")
    for c in digest.classes:
        trend = trend_text(c.count, c.previous, c.trend)
        out.append(f"  {c.class_id:<38} {c.count:>3} {c.previous:>7}  {trend:<8} {c.gpu_hours:>6.1f}")
    if not digest.classes:
        out.append("  none in either period")
    else:
        out.append(f"  {'total':<38} {digest.total:>3} {digest.total_previous:>7}")
    out.append("")

    out.append("Recurring failures")
    for f in digest.fingerprints:
        incidents = counted(f.incidents, "incident")
        out.append(
            f"  {f.class_id} on {_hosts(f.hosts)}: {f.count}x this week ({f.previous} before), {incidents},"
            f" latest #{f.incident_id}"
        )
    if not digest.fingerprints:
        out.append("  nothing happened twice")
    out.append("")

    out.append("Lemon nodes (drain candidates)")
    for n in digest.lemons:
        cluster = f" ({_safe(n.cluster)})" if n.cluster else ""
        out.append(
            f"  {_safe(n.hostname)}{cluster}: score {n.score:.1f}, {counted(n.incidents, 'incident')},"
            f" {n.failed_probes}/{n.probe_runs} probes failed"
        )
    if not digest.lemons:
        out.append("  none")
    out.append("")

    out.append(f"GPU-hours lost: {digest.gpu_hours:.1f}")
    for cost in digest.costs:
        known = (
            ""
            if cost.estimated == cost.occurrences
            else f" ({cost.estimated} of {cost.occurrences} estimated)"
        )
        out.append(f"  {cost.class_id:<38} {cost.gpu_hours:>7.1f}{known}")
    out.append("")

    out.append("Time to resolve (incidents resolved this week)")
    for r in digest.resolve:
        out.append(f"  {r.key:<38} median {r.median_hours:.1f} h over {r.resolved}")
    if not digest.resolve:
        out.append("  nothing resolved")
    out.append("")

    out.append(f"Open for more than {digest.stale_days} days")
    out += [f"  {stale_text(s)}" for s in digest.stale] or ["  none"]
    out.append("")

    out.append("Fixes (held = no recurrence within 14 days)")
    for fix in digest.fixes:
        out.append(f"  {_safe(fix.fix)}: {fix.held} held, {fix.recurred} recurred, {fix.pending} pending")
    if not digest.fixes:
        out.append("  no resolution named a fix")
    out.append("")

    out.append("What the bot learned")
    out.append("  Diagnoses corrected by users:")
    for correction in digest.corrections:
        corrected = correction.corrected or "(no class given)"
        out.append(
            f"    #{correction.incident_id} {_safe(correction.given)} -> {_safe(corrected)}"
            f" (by {_safe(correction.user)})" + (f": {_safe(correction.note)}" if correction.note else "")
        )
    if not digest.corrections:
        out.append("    none")
    out.append("  Unrecognised log templates (draft a signature: ncclbot residue --signature ID):")
    for t in digest.residue:
        seen = f"{counted(t.occurrences, 'diagnosis', 'diagnoses')}, {counted(t.lines, 'line')}"
        out.append(f"    [{t.template_id}] {seen}: {_safe(t.template)}")
        out.append(f"        e.g. {_safe(t.example)}")
    if not digest.residue:
        out.append("    none")
    return "\n".join(out) + "\n"
