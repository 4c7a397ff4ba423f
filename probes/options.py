"""The probe's options: parsed on the node (argparse) and rebuilt as an argument list by launchers."""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field

GPU_MAX_BYTES = 1 << 30
# Gloo on CPU is the fallback path, not the one being qualified: a smaller default keeps a laptop run short.
CPU_MAX_BYTES = 16 << 20
DEFAULT_DEADLINE_S = 120.0
DEFAULT_P2P_BYTES = 64 << 20
SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)(I?B)?\s*$", re.IGNORECASE)
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """`8`, `64K`, `1M`, `1GiB` -> bytes (binary units, as nccl-tests prints them)."""
    match = SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r} (examples: 8, 64K, 1M, 1G)")
    value = int(match.group(1)) * UNITS[match.group(2).upper()]
    if value < 4 or value % 4:
        raise ValueError(f"size {text!r} must be a positive multiple of 4 bytes (float32 elements)")
    return value


def sweep(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


@dataclass(slots=True)
class ProbeOptions:
    json: bool = False
    backend: str = "auto"
    explicit_sizes: list[int] = field(default_factory=list)
    min_bytes: int = 8
    max_bytes: int | None = None
    iters: int = 5
    p2p_bytes_option: int | None = None
    deadline: float = DEFAULT_DEADLINE_S
    no_checks: bool = False
    baselines: str | None = None
    nproc: int | None = None
    nnodes: int = 1
    node_rank: int | None = 0  # None: from $SLURM_NODEID on the node (srun runs one argv everywhere)
    master_addr: str | None = None
    master_port: int | None = None
    backend_resolved: str | None = None
    watch_stdin: bool = False

    @property
    def sizes(self) -> list[int]:
        if self.explicit_sizes:
            return self.explicit_sizes
        default_max = CPU_MAX_BYTES if self.backend_resolved == "gloo" else GPU_MAX_BYTES
        return sweep(self.min_bytes, self.max_bytes or default_max)

    @property
    def p2p_bytes(self) -> int:
        return self.p2p_bytes_option or min(max(self.sizes), DEFAULT_P2P_BYTES)

    def to_argv(self) -> list[str]:
        """Arguments that make a remote `python -m probes.allreduce` run with these options."""
        argv = ["--backend", self.backend, "--iters", str(self.iters), "--deadline", f"{self.deadline:g}"]
        if self.json:
            argv.append("--json")
        if self.explicit_sizes:
            argv += ["--sizes", ",".join(str(s) for s in self.explicit_sizes)]
        else:
            argv += ["--min-bytes", str(self.min_bytes)]
            if self.max_bytes:
                argv += ["--max-bytes", str(self.max_bytes)]
        if self.p2p_bytes_option:
            argv += ["--p2p-bytes", str(self.p2p_bytes_option)]
        if self.no_checks:
            argv.append("--no-checks")
        if self.watch_stdin:
            argv.append("--watch-stdin")
        if self.baselines:
            argv += ["--baselines", self.baselines]
        if self.nproc:
            argv += ["--nproc", str(self.nproc)]
        if self.nnodes > 1:
            argv += ["--nnodes", str(self.nnodes)]
            if self.node_rank is not None:
                argv += ["--node-rank", str(self.node_rank)]
        if self.master_addr:
            argv += ["--master-addr", self.master_addr]
        if self.master_port:
            argv += ["--master-port", str(self.master_port)]
        return argv


def _size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _sizes_arg(text: str) -> list[int]:
    return [_size_arg(part) for part in text.split(",") if part.strip()]


def add_probe_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the result as one JSON document")
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    parser.add_argument("--sizes", type=_sizes_arg, help="explicit sizes, e.g. 8,1K,1M (overrides the sweep)")
    parser.add_argument("--min-bytes", type=_size_arg, default=8, help="sweep start (default 8)")
    parser.add_argument(
        "--max-bytes", type=_size_arg, help="sweep end, doubling (default 1G with NCCL, 16M with Gloo on CPU)"
    )
    parser.add_argument("--iters", type=int, default=5, help="timed iterations per size (default 5)")
    parser.add_argument(
        "--p2p-bytes", type=_size_arg, help="ring send/recv message size (default min(max, 64M))"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=DEFAULT_DEADLINE_S,
        help="hard deadline for the whole probe, seconds",
    )
    parser.add_argument("--no-checks", action="store_true", help="skip the node checks")
    parser.add_argument(
        "--watch-stdin",
        action="store_true",
        help="stop the ranks when stdin closes (how an ssh launcher that gave up reaches the node)",
    )
    parser.add_argument("--baselines", help="JSON file of per-SKU busbw baselines (see probes.baselines)")
    parser.add_argument("--nproc", type=int, help="local ranks to start when not under torchrun")
    parser.add_argument("--nnodes", type=int, default=1, help="nodes taking part (each runs this command)")
    parser.add_argument(
        "--node-rank", type=int, help="this node's index among --nnodes (default: $SLURM_NODEID, else 0)"
    )
    parser.add_argument("--master-addr", help="address of node 0 (default 127.0.0.1 on a single node)")
    parser.add_argument("--master-port", type=int, help="rendezvous port on node 0 (default: a free port)")


def options_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ProbeOptions:
    if args.iters < 1:
        parser.error("--iters must be at least 1")
    if args.deadline <= 0:
        parser.error("--deadline must be positive")
    if args.nproc is not None and args.nproc < 1:
        parser.error("--nproc must be at least 1")
    if args.node_rank is None:
        # Under `srun` every node runs the same argument list; Slurm tells each which one it is.
        args.node_rank = int(os.environ.get("SLURM_NODEID", "0")) if args.nnodes > 1 else 0
    if not 0 <= args.node_rank < args.nnodes:
        parser.error("--node-rank must be in [0, --nnodes)")
    # Under srun, node 0 is the first node of the step (probes.spawn asks Slurm), whatever order the
    # nodes were named in.
    in_slurm_step = "SLURM_STEP_NODELIST" in os.environ
    if args.nnodes > 1 and (not (args.master_addr or in_slurm_step) or not args.master_port):
        parser.error("--nnodes > 1 needs --master-addr (unless run by srun) and --master-port")
    return ProbeOptions(
        json=args.json,
        backend=args.backend,
        explicit_sizes=args.sizes or [],
        min_bytes=args.min_bytes,
        max_bytes=args.max_bytes,
        iters=args.iters,
        p2p_bytes_option=args.p2p_bytes,
        deadline=args.deadline,
        no_checks=args.no_checks,
        watch_stdin=args.watch_stdin,
        baselines=args.baselines,
        nproc=args.nproc,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
    )
