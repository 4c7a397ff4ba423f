"""One rank's collectives: the allreduce size sweep with a correctness check at every size, and the
ring send/recv pass. Results go back as plain dicts that the coordinator assembles (probes.assemble).

Every rank fills its buffer with a shared pattern plus a small per-rank integer, so the exact sum is
known everywhere and float32 represents it exactly; a wrong element anywhere is a wrong result.
Fault injection (tests only) is read from NCCLBOT_PROBE_FAULT: see probes.allreduce.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from probes import progress
from probes.options import ProbeOptions
from probes.result import LinkResult, algbw_gbps, allreduce_busbw_gbps

FAULT_ENV = "NCCLBOT_PROBE_FAULT"
ELEMENT_BYTES = 4  # float32
PATTERN_PERIOD = 251
CONTRIB_PERIOD = 13

PhaseCallback = Callable[[str], None]


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

    def sweep(self, on_phase: PhaseCallback) -> dict[str, Any]:
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

    def ring_pass(self, pattern: Any, on_phase: PhaseCallback) -> dict[str, Any]:
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
