"""The allreduce probe: a size sweep with correctness at every size on every rank, a ring send/recv
pass, node checks and a verdict, under a hard deadline.

Run it under torchrun (`torchrun --nproc_per_node=N -m probes.allreduce --json`), or on its own
(`python -m probes.allreduce --nproc N --json`), which starts the N local ranks itself (probes.spawn).
NCCL on GPUs, Gloo on CPU. Rank 0 prints one JSON document (probes.result.ProbeResult) on stdout;
every rank writes progress lines on stderr (probes.progress).

Deadline: rank 0 runs a coordinator thread that watches each rank's check-in and phase through the
rendezvous TCPStore (probes.sideband). When the deadline passes, or a rank reports an error, it prints
the result naming the ranks that never arrived or never finished and exits, which makes torchrun (or
the spawner) tear the others down. Every rank also ends itself a little after the deadline, so nothing
outlives it.

Fault injection, for the tests only: NCCLBOT_PROBE_FAULT=delay:RANK:SECONDS (that rank sleeps before
checking in), hang:RANK:SECONDS (that rank joins the group, then stalls before the first collective)
or corrupt:RANK (that rank alters its result after every collective).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import timedelta

from probes import progress
from probes.assemble import assemble
from probes.options import ProbeOptions, add_probe_arguments, options_from_args
from probes.report import render_text
from probes.result import ProbeResult
from probes.spawn import SELF_DESTRUCT_STATUS, spawn_local_ranks
from probes.worker import FAULT_ENV, Fault, Worker, versions

# Ranks end themselves this long after the deadline if nothing else has ended them.
SELF_DESTRUCT_GRACE_S = 5.0
COLLECTIVE_TIMEOUT_SLACK_S = 3.0


def _self_destruct(after_s: float) -> None:
    timer = threading.Timer(after_s, lambda: os._exit(SELF_DESTRUCT_STATUS))
    timer.daemon = True
    timer.start()


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:400]


def emit_result(result: ProbeResult, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(result.to_json() + "\n")
    else:
        sys.stdout.write(render_text(result) + "\n")
    sys.stdout.flush()
    progress.emit("verdict", rank=0, verdict=result.verdict)


def run_rank(opts: ProbeOptions) -> int:
    """Body of one rank (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set by torchrun or the spawner)."""
    started = time.monotonic()
    deadline_at = started + opts.deadline
    _self_destruct(opts.deadline + SELF_DESTRUCT_GRACE_S)
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    host = socket.gethostname()
    fault = Fault.parse(os.environ.get(FAULT_ENV))
    if fault.hits("delay", rank):
        time.sleep(fault.seconds)
    progress.emit("arrived", rank=rank, host=host, world_size=world)
    try:
        import torch.distributed as dist
    except ImportError as error:
        progress.emit("error", rank=rank, host=host, error=f"torch is not installed here ({error})")
        return 1

    from probes.checks import run_checks
    from probes.sideband import Sideband, wait_for_outcome

    try:
        worker = Worker(opts, rank, world, local_rank, fault)
    except Exception as error:  # e.g. --backend nccl on a machine without a usable GPU
        progress.emit("error", rank=rank, host=host, error=f"backend {opts.backend}: {_first_line(error)}")
        return 1
    opts.backend_resolved = worker.backend
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    # Under torchrun the agent already serves the store on MASTER_PORT; otherwise rank 0 hosts it.
    hosts_store = rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    remaining = timedelta(seconds=max(deadline_at - time.monotonic(), 1.0))
    try:
        store = dist.TCPStore(addr, port, world, hosts_store, timeout=remaining, wait_for_workers=False)
    except Exception as error:  # rank 0 absent or unreachable: say so on stderr, where launchers look
        progress.emit("error", rank=rank, host=host, error=f"rendezvous {addr}:{port}: {_first_line(error)}")
        return 1
    sideband = Sideband(store)
    device_name = worker.device_name()
    label = device_name if worker.device.type == "cpu" else f"{device_name} ({worker.device})"
    info = {"host": host, "local_rank": local_rank, "device": label}
    sideband.arrive(rank, {**info, "scheduler_node": os.environ.get("SLURMD_NODENAME")})

    found_versions = versions(worker.torch)
    if local_rank == 0 and not opts.no_checks:
        multi_host = world > local_world
        expected = local_world if worker.device.type == "cuda" else None
        checks = run_checks(multi_host=multi_host, expected_gpus=expected, versions=found_versions)
        sideband.post_checks(rank, [asdict(c) for c in checks])

    outcome: dict[str, int] = {}
    coordinator: threading.Thread | None = None
    if rank == 0:
        watcher = Sideband(dist.TCPStore(addr, port, world, False, timeout=remaining))

        def coordinate() -> None:
            reached = wait_for_outcome(watcher, world, deadline_at)
            result = assemble(
                watcher.snapshot(world),
                backend=worker.backend,
                world=world,
                sizes=opts.sizes,
                host=host,
                deadline_s=opts.deadline if reached == "deadline" else None,
                started=started,
                opts=opts,
                device_name=device_name,
                local_world=local_world,
                found_versions=found_versions,
            )
            emit_result(result, opts.json)
            code = 1 if result.verdict == "failed" else 0
            outcome["code"] = code
            if code:
                # Rank 0's own thread may be stuck in a collective that will never complete.
                os._exit(code)

        coordinator = threading.Thread(target=coordinate, name="probe-coordinator", daemon=True)
        coordinator.start()

    def on_phase(phase: str) -> None:
        sideband.phase(rank, phase)

    try:
        on_phase("init")
        # A little past the deadline, so that a rank that never arrives is reported by the coordinator at
        # the deadline rather than as the store timeouts it causes on the others.
        worker.init_group(store, deadline_at - time.monotonic() + COLLECTIVE_TIMEOUT_SLACK_S)
        progress.emit("initialized", rank=rank, host=host, backend=worker.backend)
        payload = worker.sweep(on_phase)
        sideband.finish(rank, payload)
        progress.emit("done", rank=rank, host=host)
    except Exception as error:
        message = _first_line(error)
        progress.emit("error", rank=rank, host=host, error=message)
        sideband.fail(rank, message)
        if coordinator is None:
            os._exit(1)
    if coordinator is not None:
        coordinator.join()
    with contextlib.suppress(Exception):  # teardown after a failed run is best effort
        dist.destroy_process_group()
    return outcome.get("code", 0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m probes.allreduce",
        description="Allreduce probe: size sweep with correctness, ring send/recv, node checks, verdict.",
    )
    add_probe_arguments(parser)
    args = parser.parse_args(argv)
    opts = options_from_args(parser, args)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return run_rank(opts)
    return spawn_local_ranks(opts, list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
