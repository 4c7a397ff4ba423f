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
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from probes import progress
from probes.baselines import (
    BaselineError,
    compare_with_baseline,
    find_baseline,
    load_baselines,
    peak_busbw,
    sku_name,
)
from probes.options import ProbeOptions, add_probe_arguments, options_from_args
from probes.report import render_text
from probes.result import (
    Check,
    LinkResult,
    ProbeResult,
    RankResult,
    SizeResult,
    algbw_gbps,
    allreduce_busbw_gbps,
)
from probes.spawn import SELF_DESTRUCT_STATUS, spawn_local_ranks
from probes.verdict import decide

FAULT_ENV = "NCCLBOT_PROBE_FAULT"
# Ranks end themselves this long after the deadline if nothing else has ended them.
SELF_DESTRUCT_GRACE_S = 5.0
COLLECTIVE_TIMEOUT_SLACK_S = 3.0
ELEMENT_BYTES = 4  # float32
PATTERN_PERIOD = 251
CONTRIB_PERIOD = 13


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str = ""
    rank: int = -1
    seconds: float = 0.0

    @classmethod
    def parse(cls, spec: str | None) -> Fault:
        if not spec:
            return cls()
        parts = spec.split(":")
        if parts[0] in {"delay", "hang"} and len(parts) == 3:
            return cls(parts[0], int(parts[1]), float(parts[2]))
        if parts[0] == "corrupt" and len(parts) == 2:
            return cls("corrupt", int(parts[1]))
        raise SystemExit(f"probes.allreduce: bad {FAULT_ENV}={spec!r}")

    def hits(self, kind: str, rank: int) -> bool:
        return self.kind == kind and self.rank == rank


def contribution(rank: int) -> float:
    """What rank `rank` adds to the pattern; small integers keep every sum exact in float32."""
    return float(rank % CONTRIB_PERIOD + 1)


def _self_destruct(after_s: float) -> None:
    timer = threading.Timer(after_s, lambda: os._exit(SELF_DESTRUCT_STATUS))
    timer.daemon = True
    timer.start()


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:400]


class Worker:
    """One rank's work: collectives on the device, results posted to the side channel."""

    def __init__(self, opts: ProbeOptions, rank: int, world: int, local_rank: int, fault: Fault) -> None:
        import torch

        self.torch = torch
        self.opts = opts
        self.rank = rank
        self.world = world
        self.local_rank = local_rank
        self.fault = fault
        self.backend = opts.backend
        if self.backend == "auto":
            import torch.distributed as dist

            nccl = torch.cuda.is_available() and dist.is_nccl_available()
            self.backend = "nccl" if nccl else "gloo"
        if self.backend == "nccl":
            if not torch.cuda.is_available():
                raise RuntimeError("no usable CUDA device (torch.cuda.is_available() is False)")
            torch.cuda.set_device(local_rank)
            self.device = torch.device("cuda", local_rank)
        else:
            self.device = torch.device("cpu")

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def device_name(self) -> str:
        if self.device.type == "cuda":
            return str(self.torch.cuda.get_device_name(self.device))
        return "cpu"

    def init_group(self, store: Any, timeout_s: float) -> None:
        import torch.distributed as dist

        kwargs: dict[str, Any] = {}
        if self.device.type == "cuda":
            kwargs["device_id"] = self.device
        dist.init_process_group(
            self.backend,
            store=dist.PrefixStore("pg", store),
            rank=self.rank,
            world_size=self.world,
            timeout=timedelta(seconds=max(timeout_s, 1.0)),
            **kwargs,
        )

    def sweep(self, on_phase: Any) -> dict[str, Any]:
        import torch.distributed as dist

        torch = self.torch
        sizes = self.opts.sizes
        largest = max(max(sizes), self.opts.p2p_bytes) // ELEMENT_BYTES
        base = torch.arange(PATTERN_PERIOD, dtype=torch.float32, device=self.device)
        pattern = base.repeat(-(-largest // PATTERN_PERIOD))[:largest]
        buf = torch.empty(largest, dtype=torch.float32, device=self.device)
        total = sum(contribution(r) for r in range(self.world))
        times: list[float] = []
        correct: list[bool] = []
        started = time.perf_counter()
        if self.fault.hits("hang", self.rank):
            time.sleep(self.fault.seconds)
        for nbytes in sizes:
            on_phase(f"allreduce {progress.human_bytes(nbytes)}")
            n = nbytes // ELEMENT_BYTES
            view, pat = buf[:n], pattern[:n]
            view.copy_(pat).add_(contribution(self.rank))
            dist.all_reduce(view)
            self.sync()
            if self.fault.hits("corrupt", self.rank):
                view[0] += 1
            view.sub_(pat, alpha=self.world)
            correct.append(bool((view == total).all().item()))
            view.zero_()
            dist.barrier()
            self.sync()
            t0 = time.perf_counter()
            for _ in range(self.opts.iters):
                dist.all_reduce(view)
            self.sync()
            elapsed = (time.perf_counter() - t0) / self.opts.iters
            times.append(elapsed * 1e6)
            if self.rank == 0:
                algbw = algbw_gbps(nbytes, elapsed)
                progress.emit(
                    "size", rank=0, bytes=nbytes, busbw_gbps=allreduce_busbw_gbps(algbw, self.world)
                )
        sweep_us = (time.perf_counter() - started) * 1e6
        link = self.ring_pass(pattern, on_phase) if self.world > 1 else None
        return {"size_time_us": times, "correct": correct, "time_us": sweep_us, "link": link}

    def ring_pass(self, pattern: Any, on_phase: Any) -> dict[str, Any]:
        """Send to the next rank, receive from the previous one: localises a bad GPU or link."""
        import torch.distributed as dist

        on_phase("ring send/recv")
        n = self.opts.p2p_bytes // ELEMENT_BYTES
        nxt, prev = (self.rank + 1) % self.world, (self.rank - 1) % self.world
        send = pattern[:n].clone().add_(contribution(self.rank))
        recv = self.torch.zeros_like(send)

        def exchange() -> None:
            ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prev)]
            for request in dist.batch_isend_irecv(ops):
                request.wait()
            self.sync()

        exchange()
        if self.fault.hits("corrupt", self.rank):
            recv[0] += 1
        ok = bool(recv.sub_(pattern[:n]).eq_(contribution(prev)).all().item())
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(self.opts.iters):
            exchange()
        elapsed = (time.perf_counter() - t0) / self.opts.iters
        nbytes = n * ELEMENT_BYTES
        return asdict(LinkResult(prev, self.rank, nbytes, elapsed * 1e6, algbw_gbps(nbytes, elapsed), ok))


def versions(torch: Any) -> dict[str, str]:
    found = {"torch": str(torch.__version__)}
    if torch.version.cuda:
        found["cuda"] = str(torch.version.cuda)
    if torch.cuda.is_available():
        with contextlib.suppress(AttributeError, RuntimeError):
            found["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
    return found


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
