"""Run the probe on named nodes through Slurm: `srun -w NODES` with one task per node and the GPUs.

Each node's task runs `python -m probes.allreduce`, which learns its node rank from SLURM_NODEID; the
first node hosts the rendezvous and prints the result. `--immediate` keeps a busy or drained node from
leaving the probe pending, and `--time` lets Slurm end the step even if this process is killed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from probes import progress
from probes.launchers.base import deadline_timeout, result_from_output, run_command
from probes.options import ProbeOptions
from probes.result import ProbeResult

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


def srun_argv(hosts: list[str], opts: ProbeOptions, config: SlurmConfig) -> list[str]:
    node_opts = dataclasses.replace(opts, json=True)
    if len(hosts) > 1:
        # No --node-rank: each task reads SLURM_NODEID (probes.options).
        node_opts = dataclasses.replace(
            node_opts, nnodes=len(hosts), node_rank=None, master_addr=hosts[0], master_port=config.master_port
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


def launch(
    hosts: list[str],
    opts: ProbeOptions,
    config: SlurmConfig,
    *,
    on_progress: progress.ProgressCallback | None = None,
    timeout: float | None = None,
) -> ProbeResult:
    limit = deadline_timeout(opts.deadline, timeout) + config.immediate_s
    tracker = progress.Tracker(on_progress)
    outcome = run_command(srun_argv(hosts, opts, config), timeout=limit, on_line=tracker.feed)
    if outcome.missing_tool:
        from probes.result import failure

        return failure(f"{config.srun} not found: Slurm client tools are not installed here", host=hosts[0])
    return result_from_output(
        outcome.stdout,
        outcome.stderr,
        host=hosts[0],
        launcher="slurm",
        returncode=outcome.returncode,
        timed_out=outcome.timed_out,
        timeout=limit,
        tracker=tracker,
    )
