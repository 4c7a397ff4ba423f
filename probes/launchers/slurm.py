"""Run the probe on named nodes through Slurm: `srun -w NODES` with one task per node and the GPUs.

Each node's task runs `python -m probes.allreduce`, which learns its node rank from SLURM_NODEID; the
first node hosts the rendezvous and prints the result. `--immediate` keeps a busy or drained node from
leaving the probe pending, and `--time` lets Slurm end the step even if this process is killed.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

from probes import progress
from probes.launchers.base import deadline_timeout, result_from_output, run_command
from probes.options import ProbeOptions
from probes.result import ProbeResult, failure

DEFAULT_MASTER_PORT = 29556


@dataclass(slots=True)
class SlurmConfig:
    partition: str | None = None
    gpus_per_node: int | None = None  # None: ask for none (CPU / Gloo); the probe uses what it gets
    cpus_per_task: int | None = None
    account: str | None = None
    immediate_s: int = 60
    python: str = "python3"
    chdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    master_port: int = DEFAULT_MASTER_PORT
    srun: str = "srun"
    scontrol: str = "scontrol"


def srun_argv(hosts: list[str], opts: ProbeOptions, config: SlurmConfig) -> list[str]:
    node_opts = dataclasses.replace(opts, json=True)
    if len(hosts) > 1:
        # No --node-rank and no --master-addr: each task reads SLURM_NODEID, and node 0 is the step's
        # first node, which need not be the first one named here (probes.options, probes.spawn).
        node_opts = dataclasses.replace(
            node_opts, nnodes=len(hosts), node_rank=None, master_addr=None, master_port=config.master_port
        )
    if config.gpus_per_node and not node_opts.nproc:
        node_opts = dataclasses.replace(node_opts, nproc=config.gpus_per_node)
    minutes = max(1, math.ceil((opts.deadline + 60) / 60))
    exports = ",".join(
        ["ALL", "NCCLBOT_PROBE_LAUNCHER=slurm", *(f"{k}={v}" for k, v in sorted(config.env.items()))]
    )
    argv = [
        config.srun,
        "--job-name=ncclbot-probe",
        f"--nodelist={','.join(hosts)}",
        f"--nodes={len(hosts)}",
        "--ntasks-per-node=1",
        f"--time={minutes}",
        f"--immediate={config.immediate_s}",
        "--kill-on-bad-exit=1",
        f"--export={exports}",
    ]
    if config.gpus_per_node:
        argv.append(f"--gpus-per-node={config.gpus_per_node}")
    if config.cpus_per_task:
        argv.append(f"--cpus-per-task={config.cpus_per_task}")
    if config.partition:
        argv.append(f"--partition={config.partition}")
    if config.account:
        argv.append(f"--account={config.account}")
    if config.chdir:
        argv.append(f"--chdir={config.chdir}")
    return [*argv, config.python, "-m", "probes.allreduce", *node_opts.to_argv()]


def node_problem(host: str, config: SlurmConfig) -> str | None:
    """Why Slurm cannot run the probe on `host` (unknown, down, drained), or None."""
    shown = run_command([config.scontrol, "show", "node", "-o", host], timeout=30)
    if shown.missing_tool:
        return f"{config.scontrol} not found: Slurm client tools are not installed here"
    if shown.returncode != 0:
        # srun does not always refuse a name it does not know; scontrol does.
        return f"Slurm does not know node {host}: {(shown.stdout + shown.stderr).strip()[:200]}"
    state = re.search(r"\bState=(\S+)", shown.stdout)
    if state and re.search(r"DOWN|DRAIN|FAIL|NOT_RESPONDING", state.group(1)):
        # `Reason=text [user@time]` comes before the next `Key=` field.
        reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?: \w+=|$)", shown.stdout)
        because = f" ({reason.group(1)})" if reason else ""
        return f"Slurm node {host} is unavailable: State={state.group(1)}{because}"
    return None


def launch(
    hosts: list[str],
    opts: ProbeOptions,
    config: SlurmConfig,
    *,
    on_progress: progress.ProgressCallback | None = None,
    timeout: float | None = None,
) -> ProbeResult:
    limit = deadline_timeout(opts.deadline, timeout) + config.immediate_s
    problems = [problem for host in hosts if (problem := node_problem(host, config))]
    if problems:
        result = failure(problems[0], host=hosts[0], launcher="slurm")
        result.reasons = problems
        return result
    tracker = progress.Tracker(on_progress)
    outcome = run_command(srun_argv(hosts, opts, config), timeout=limit, on_line=tracker.feed)
    if outcome.missing_tool:
        return failure(f"{config.srun} not found: Slurm client tools are not installed here", host=hosts[0])
    result = result_from_output(
        outcome.stdout,
        outcome.stderr,
        host=hosts[0],
        launcher="slurm",
        returncode=outcome.returncode,
        timed_out=outcome.timed_out,
        timeout=limit,
        tracker=tracker,
    )
    ran_on = {rank.scheduler_node for rank in result.ranks if rank.scheduler_node}
    if ran_on and ran_on != set(hosts):
        result.verdict = "failed"
        result.reasons.insert(
            0, f"Slurm ran the probe on {', '.join(sorted(ran_on))}, not {', '.join(hosts)}"
        )
    return result
