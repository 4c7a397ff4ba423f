"""`ncclbot probe [NODE...] [--via local|ssh|slurm|k8s] [--nproc N] [--json]`: run the allreduce probe
and node checks on the suspect node(s), show progress, print a verdict, store the run.

With several nodes and `--bisect`, the nodes are bisected (probes.bisect) to find the bad one. The
verdict is also compared with this fleet's stored history of the same SKU (previous probe runs in the
store), which is the only place the store meets the probe: probes/ itself never imports bot/.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bot.cli import UsageError
from bot.render.safe_text import strip_controls
from bot.services.probe import LauncherConfigs, run_probe
from probes.bisect import BisectResult, bisect
from probes.launchers import VIAS, KubernetesConfig, LaunchError, SlurmConfig, SshConfig
from probes.options import add_probe_arguments, options_from_args
from probes.progress import human_bytes
from probes.result import ProbeResult

STYLE = {"healthy": "bold green", "degraded": "bold yellow", "failed": "bold red"}
CHECK_STYLE = {"pass": "green", "warn": "yellow", "fail": "red", "skipped": "dim"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "probe",
        help="run the allreduce probe and node checks on node(s) and print a verdict",
        description="Allreduce size sweep with correctness on every rank, ring send/recv, node checks; "
        "verdict healthy / degraded / failed. Without nodes (or with --via local) it probes this machine.",
    )
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="node(s) to probe together")
    parser.add_argument("--via", choices=VIAS, help="launcher (default: local without nodes, else ssh)")
    parser.add_argument("--bisect", action="store_true", help="several nodes: bisect to find the bad one")
    parser.add_argument("--timeout", type=float, help="launcher timeout, seconds (default: deadline + 60)")
    parser.add_argument("--no-store", action="store_true", help="do not record the run in the store")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--cluster", help="cluster name stored with the run")
    parser.add_argument("--remote-python", default="python3", help="python on the nodes (ssh, slurm)")
    parser.add_argument("--remote-pythonpath", help="PYTHONPATH on the nodes when ncclbot is not installed")
    ssh = parser.add_argument_group("ssh")
    ssh.add_argument("--ssh-user", default=os.environ.get("NCCLBOT_SSH_USER"))
    ssh.add_argument("--ssh-port", type=int, default=int(os.environ.get("NCCLBOT_SSH_PORT", "22")))
    ssh.add_argument("--ssh-key", action="append", default=None, help="private key (repeatable)")
    ssh.add_argument("--ssh-known-hosts", default=os.environ.get("NCCLBOT_SSH_KNOWN_HOSTS"))
    slurm = parser.add_argument_group("slurm")
    slurm.add_argument("--partition")
    slurm.add_argument("--gpus-per-node", type=int)
    k8s = parser.add_argument_group("kubernetes")
    k8s.add_argument("--namespace", default="default")
    k8s.add_argument("--image", default="ncclbot-probe:latest")
    add_probe_arguments(parser)
    parser.set_defaults(handler=_handle, _parser=parser)


def _handle(args: argparse.Namespace) -> int:
    opts = options_from_args(args._parser, args)
    via = args.via or ("ssh" if args.nodes else "local")
    console = Console(stderr=True, highlight=False)

    def on_progress(line: str) -> None:
        if not args.quiet:
            console.print(f"[dim]probe:[/] {_safe(line)}")

    keys = args.ssh_key or [k for k in [os.environ.get("NCCLBOT_SSH_KEY")] if k]
    ssh_config = SshConfig(
        username=args.ssh_user,
        port=args.ssh_port,
        client_keys=keys,
        known_hosts=args.ssh_known_hosts,
        python=args.remote_python,
        pythonpath=args.remote_pythonpath,
    )
    slurm_config = SlurmConfig(
        partition=args.partition,
        gpus_per_node=args.gpus_per_node,
        python=args.remote_python,
        env={"PYTHONPATH": args.remote_pythonpath} if args.remote_pythonpath else {},
    )
    k8s_config = KubernetesConfig(namespace=args.namespace, image=args.image)

    def probe(nodes: Sequence[str]) -> ProbeResult:
        try:
            return run_probe(
                via,
                nodes,
                opts,
                on_progress=on_progress,
                timeout=args.timeout,
                launchers=LauncherConfigs(ssh_config, slurm_config, k8s_config),
                store=not args.no_store,
                cluster=args.cluster,
            )
        except LaunchError as error:
            raise UsageError(str(error)) from error

    if args.bisect:
        if len(args.nodes) < 2:
            raise UsageError("--bisect needs at least two nodes")
        outcome = bisect(args.nodes, lambda nodes: probe(nodes).verdict != "failed", on_progress=on_progress)
        print(json.dumps(bisect_json(outcome)) if args.json else render_bisect(outcome))
        return 0
    result = probe(args.nodes)
    if args.json:
        print(result.to_json())
    else:
        render(result, Console())
    return 0


def _safe(text: object) -> str:
    """Remote output (kernel log lines, ssh errors, node names) inside Rich markup: shown as text, never
    interpreted as markup or as terminal escapes."""
    return escape(strip_controls(str(text)))


def render(result: ProbeResult, console: Console) -> None:
    hosts = _safe(", ".join(result.hosts) or result.host)
    console.print(
        f"[{STYLE[result.verdict]}]{result.verdict.upper()}[/]  {result.backend}, {result.world_size} ranks"
        f" on {hosts}" + (f", launched via {result.launcher}" if result.launcher else "")
    )
    for reason in result.reasons:
        console.print(f"  • {_safe(reason)}")
    if result.results:
        table = Table(title="allreduce (busbw = algbw × 2(n−1)/n)")
        for column in ("size", "time (µs)", "algbw GB/s", "busbw GB/s", "correct"):
            table.add_column(column, justify="right")
        for size in result.results:
            ok = "yes" if size.correct else f"[red]NO: ranks {', '.join(map(str, size.wrong_ranks))}[/]"
            table.add_row(
                human_bytes(size.bytes),
                f"{size.time_us:.1f}",
                f"{size.algbw_gbps:.3f}",
                f"{size.busbw_gbps:.3f}",
                ok,
            )
        console.print(table)
    if result.baseline_busbw_gbps is not None:
        console.print(f"baseline for {_safe(result.sku)}: {result.baseline_busbw_gbps:.0f} GB/s busbw")
    if result.links:
        links = Table(title="ring send/recv")
        for column in ("hop", "GB/s", "data"):
            links.add_column(column)
        for link in result.links:
            links.add_row(
                _safe(f"{link.src} → {link.dst}"),
                f"{link.gbps:.3f}",
                "ok" if link.correct else "[red]WRONG[/]",
            )
        console.print(links)
    if result.checks:
        checks = Table(title="node checks")
        for column in ("host", "check", "status", "evidence"):
            checks.add_column(column, overflow="fold")
        for check in result.checks:
            style = CHECK_STYLE.get(check.status, "")
            checks.add_row(
                _safe(check.host or ""),
                _safe(check.name),
                f"[{style}]{_safe(check.status)}[/]",
                _safe(check.evidence),
            )
        console.print(checks)


def bisect_json(outcome: BisectResult) -> dict[str, Any]:
    return {
        "bad": outcome.bad,
        "unresolved": outcome.unresolved,
        "rounds": outcome.rounds,
        "whole_set_healthy": outcome.whole_set_healthy,
        "steps": [{"round": s.round, "nodes": s.nodes, "healthy": s.healthy} for s in outcome.steps],
    }


def render_bisect(outcome: BisectResult) -> str:
    if outcome.whole_set_healthy:
        return "all nodes pass together: nothing to bisect"
    lines = [f"bad node(s): {', '.join(outcome.bad) or 'none isolated'} after {outcome.rounds} round(s)"]
    lines += [f"unresolved (halves pass alone): {', '.join(group)}" for group in outcome.unresolved]
    return "\n".join(lines)
