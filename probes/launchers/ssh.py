"""Run the probe on nodes over SSH (asyncssh): key-based, host keys checked against known_hosts.

Every node runs `python -m probes.allreduce` with its node rank; node 0 hosts the rendezvous and prints
the result. asyncssh is imported only here, so the probe itself never needs it. SSH always hands the
remote side one command string: it is built from an argument list with each element quoted
(shlex.join), never from free text, and node names are validated before anything is sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
from dataclasses import dataclass, field

from probes import progress
from probes.launchers.base import deadline_timeout, result_from_output
from probes.options import ProbeOptions
from probes.result import ProbeResult, failure

CONNECT_TIMEOUT_S = 15.0
DEFAULT_MASTER_PORT = 29555


@dataclass(slots=True)
class SshConfig:
    username: str | None = None
    port: int = 22
    client_keys: list[str] = field(default_factory=list)  # empty: the ssh agent / default keys
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts; host keys are always checked
    python: str = "python3"
    pythonpath: str | None = None  # where `probes` lives on the node when it is not installed
    env: dict[str, str] = field(default_factory=dict)  # e.g. NCCL_SOCKET_IFNAME for the probe
    master_port: int = DEFAULT_MASTER_PORT


def remote_argv(
    opts: ProbeOptions, config: SshConfig, *, nnodes: int, node_rank: int, master: str
) -> list[str]:
    node_opts = dataclasses.replace(opts, json=True, watch_stdin=True)
    if nnodes > 1:
        node_opts = dataclasses.replace(
            node_opts, nnodes=nnodes, node_rank=node_rank, master_addr=master, master_port=config.master_port
        )
    env = dict(config.env, NCCLBOT_PROBE_LAUNCHER="ssh")
    if config.pythonpath:
        env["PYTHONPATH"] = config.pythonpath
    assignments = [f"{key}={value}" for key, value in sorted(env.items())]
    return ["env", *assignments, config.python, "-m", "probes.allreduce", *node_opts.to_argv()]


def connection_failure(host: str, error: BaseException) -> str:
    import asyncssh

    if isinstance(error, asyncssh.HostKeyNotVerifiable):
        return f"{host}: refused: host key verification failed ({error})"
    if isinstance(error, asyncssh.PermissionDenied):
        return f"{host}: refused: permission denied (key not accepted)"
    if isinstance(error, ConnectionRefusedError):
        return f"{host}: refused: connection refused"
    if isinstance(error, asyncio.TimeoutError | TimeoutError):
        return f"{host}: unreachable: connection timed out"
    if isinstance(error, OSError):
        return f"{host}: unreachable: {error.strerror or error}"
    return f"{host}: {type(error).__name__}: {error}"


@dataclass(slots=True)
class NodeRun:
    host: str
    stdout: str = ""
    stderr: str = ""
    exit_status: int | None = None
    problem: str | None = None
    timed_out: bool = False


async def _run_node(
    host: str, command: str, config: SshConfig, tracker: progress.Tracker, limit: float
) -> NodeRun:
    import asyncssh

    run = NodeRun(host)
    try:
        async with asyncssh.connect(
            host,
            port=config.port,
            username=config.username,
            client_keys=config.client_keys or (),
            known_hosts=config.known_hosts if config.known_hosts else (),
            connect_timeout=CONNECT_TIMEOUT_S,
        ) as connection:
            process = await connection.create_process(command)

            async def pump_err() -> None:
                async for line in process.stderr:
                    run.stderr += line
                    tracker.feed(line)

            async def pump_out() -> None:
                async for line in process.stdout:
                    run.stdout += line

            try:
                await asyncio.wait_for(asyncio.gather(pump_err(), pump_out(), process.wait()), limit)
            except TimeoutError:
                run.timed_out = True
                process.terminate()
            run.exit_status = process.exit_status
    except (TimeoutError, OSError, asyncssh.Error) as error:
        run.problem = connection_failure(host, error)
    return run


async def _launch(
    hosts: list[str], opts: ProbeOptions, config: SshConfig, tracker: progress.Tracker, limit: float
) -> list[NodeRun]:
    commands = [
        shlex.join(remote_argv(opts, config, nnodes=len(hosts), node_rank=i, master=hosts[0]))
        for i in range(len(hosts))
    ]
    return list(
        await asyncio.gather(
            *(_run_node(h, c, config, tracker, limit) for h, c in zip(hosts, commands, strict=True))
        )
    )


def launch(
    hosts: list[str],
    opts: ProbeOptions,
    config: SshConfig,
    *,
    on_progress: progress.ProgressCallback | None = None,
    timeout: float | None = None,
) -> ProbeResult:
    limit = deadline_timeout(opts.deadline, timeout)
    tracker = progress.Tracker(on_progress)
    runs = asyncio.run(_launch(hosts, opts, config, tracker, limit))
    leader = runs[0]
    problems = [run.problem for run in runs if run.problem]
    if leader.problem:
        result = failure(leader.problem, host=leader.host, launcher="ssh")
    else:
        result = result_from_output(
            leader.stdout,
            leader.stderr,
            host=leader.host,
            launcher="ssh",
            returncode=leader.exit_status,
            timed_out=leader.timed_out,
            timeout=limit,
            tracker=tracker,
        )
    others = [p for p in problems if p != leader.problem]
    if others:
        result.verdict = "failed"
        result.reasons = others + result.reasons
    return result
