"""Replies to `/nccl help | history | status | probe` and the probe verdict posted in an incident's thread.

Inputs are the store's plain records and the probe's result; everything shown that came from outside
(host names, reasons) passes through `bot.render.slack_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.render import slack_blocks as kit
from bot.render.slack_blocks import Block
from bot.render.slack_incident import archive_link, human_bytes, user_mention
from bot.render.slack_text import code_block, inline_code, prose

HISTORY_ROWS = 20
STATUS_ROWS = 20
VERDICT_EMOJI = {
    "healthy": ":large_green_circle:",
    "degraded": ":large_yellow_circle:",
    "failed": ":red_circle:",
}

HELP = (
    ("/nccl diagnose", "open a form to upload log files or paste a log"),
    ("/nccl diagnose <job-id> [cluster]", "fetch a job's logs through the configured job sources"),
    ("/nccl history [node <host> | class <id>]", "occurrences of the last 30 days"),
    ("/nccl status", "open incidents"),
    ("/nccl probe <node>", "run the allreduce probe on a node (admins)"),
    ("/nccl help", "this list"),
)


def help_blocks() -> tuple[str, list[Block]]:
    lines = "\n".join(f"`{command}` — {what}" for command, what in HELP)
    more = (
        "You can also mention me in a message that carries log files, DM me files, or use the "
        "*Diagnose with NCCL bot* shortcut on any message with files or a pasted log. Files posted later "
        "in an incident's thread join its bundle and the diagnosis is made again."
    )
    return "NCCL bot commands", [kit.section("*NCCL bot*\n" + lines), kit.context(more)]


def history_blocks(rows: Sequence[Any], *, scope: str) -> tuple[str, list[Block]]:
    """`rows` are OccurrenceSummary records, newest first."""
    title = f"History ({scope}): {len(rows)} occurrence{'s' if len(rows) != 1 else ''} in 30 days"
    if not rows:
        return title, [kit.section(f"*{prose(title)}*\nNothing recorded.")]
    lines = []
    for row in rows[:HISTORY_ROWS]:
        host = inline_code(row.host, 80) if row.host else "no host"
        job = f" job {inline_code(row.job_id, 60)}" if row.job_id else ""
        lines.append(
            f"{row.occurred_at.strftime('%m-%d %H:%M')}  {inline_code(row.class_id)} {host}{job}"
            f"  #{row.incident_id}"
        )
    more = [kit.context(f"{len(rows) - HISTORY_ROWS} more not shown")] if len(rows) > HISTORY_ROWS else []
    return title, [kit.section(f"*{prose(title)}*\n" + "\n".join(lines)), *more]


def incident_line(summary: Any) -> str:
    hosts = ", ".join(inline_code(h, 80) for h in summary.culprit_hosts[:3]) or "no host"
    link = None
    if summary.slack_channel and summary.slack_ts:
        link = archive_link(summary.slack_channel, summary.slack_ts)
    name = f"<{link}|#{summary.id}>" if link else f"#{summary.id}"
    status = " :zzz:" if summary.status == "snoozed" else ""
    return (
        f"{name} {inline_code(summary.class_id)} {hosts} — {summary.occurrences}×, last "
        f"{summary.last_seen.strftime('%m-%d %H:%M')}{status}"
    )


def status_blocks(incidents: Sequence[Any]) -> tuple[str, list[Block]]:
    """`incidents` are open or snoozed IncidentSummary records."""
    title = f"{len(incidents)} open incident{'s' if len(incidents) != 1 else ''}"
    if not incidents:
        return title, [kit.section("*No open incidents.* :tada:")]
    lines = "\n".join(incident_line(s) for s in incidents[:STATUS_ROWS])
    return title, [kit.section(f"*{title}*\n{lines}")]


def probe_blocks(
    result: dict[str, Any], *, node: str, requested_by: str | None = None
) -> tuple[str, list[Block]]:
    """A probe's JSON result: verdict, reasons and the busbw table."""
    verdict = str(result.get("verdict", "failed"))
    title = f"Probe on {prose(node, 120)}: {prose(verdict.upper(), 20)}"
    head = (
        f"{VERDICT_EMOJI.get(verdict, '')} *Probe on {inline_code(node, 120)}: {verdict.upper()}* — "
        f"{prose(str(result.get('backend', '?')), 20)}, {int(result.get('world_size') or 0)} ranks"
    )
    if requested_by:
        head += f" (asked by {user_mention(requested_by)})"
    blocks: list[Block] = [kit.section(head)]
    reasons = [f"• {prose(str(r), 400)}" for r in (result.get("reasons") or [])[:8]]
    if reasons:
        blocks.append(kit.section("\n".join(reasons)))
    rows = result.get("results") or []
    if rows:
        table = ["size        time µs   algbw GB/s  busbw GB/s  ok"]
        for row in rows[:24]:
            ok = "yes" if row.get("correct") else "NO"
            table.append(
                f"{human_bytes(int(row.get('bytes', 0))):>9}  {float(row.get('time_us', 0)):>9.1f}"
                f"  {float(row.get('algbw_gbps', 0)):>10.3f}  {float(row.get('busbw_gbps', 0)):>10.3f}  {ok}"
            )
        blocks.append(kit.section("*allreduce* (busbw = algbw × 2(n−1)/n)\n" + code_block("\n".join(table))))
    baseline = result.get("baseline_busbw_gbps")
    if baseline is not None:
        blocks.append(
            kit.context(f"baseline for {prose(str(result.get('sku')), 80)}: {float(baseline):.0f} GB/s busbw")
        )
    failed_checks = [c for c in result.get("checks") or [] if c.get("status") in ("fail", "warn")]
    if failed_checks:
        lines = [
            f"• {inline_code(str(check.get('name')))} {check.get('status')}: "
            + prose(str(check.get("evidence", "")), 300)
            for check in failed_checks[:8]
        ]
        blocks.append(kit.section("*Node checks*\n" + "\n".join(lines)))
    return title, kit.fit(blocks)[0]
