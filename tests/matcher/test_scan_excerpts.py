"""End to end through matcher.pipeline: short pasted excerpts, as people post them, for the classes whose
signatures live in the engine's files. Each must come out as its class (lines written for these tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.pipeline import diagnose

WATCHDOG = (
    "[rank{r}]:[E1129 03:41:{r:02d}.000000000 "
    "ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
    "NumelIn={n}, NumelOut={n}, Timeout(ms)={timeout}) "
    "ran for {ran} milliseconds before timing out."
)
STATUS = (
    "[rank{r}]:[E1129 03:41:{r:02d}.100000000 "
    "ProcessGroupNCCL.cpp:1663] [PG ID 0 PG GUID 0(default_pg) Rank {r}]"
    "  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {enq}, "
    "last completed work: {done}"
)


def _timeouts(ranks, seq, op="ALLREDUCE", n=8192, timeout=600000) -> list[str]:
    return [WATCHDOG.format(r=r, seq=seq, op=op, n=n, timeout=timeout, ran=timeout + 41) for r in ranks]


EXCERPTS: dict[str, tuple[str, list[str]]] = {
    "rank0-checkpoint": (
        "timeout/rank0-only-work",
        [
            "[rank0]:I1129 03:10:00.000000 4000 trainer.py:3001] Saving "
            "model checkpoint to /out/checkpoint-2000",
            *_timeouts(range(1, 8), 4113, n=1, timeout=1800000),
        ],
    ),
    "tokenizer-barrier": (
        "timeout/rank0-only-work",
        [
            "Running tokenizer on dataset:  41%|████      | 41000/100000 [29:58<43:09, 22.78 examples/s]",
            '    with training_args.main_process_first(desc="dataset map pre-processing"):',
        ],
    ),
    "jit-build": (
        "timeout/jit-compile",
        [
            "Using /root/.cache/torch_extensions/py311_cu124 as PyTorch extensions root...",
            "Emitting ninja build file /root/.cache/torch_extensions/py311_cu124/fused_adam/build.ninja...",
            "Building extension module fused_adam...",
        ],
    ),
    "lagging-rank": (
        "timeout/straggler-input",
        [
            *[STATUS.format(r=r, seq=812, enq=811 if r == 5 else 812, done=811) for r in range(8)],
            *_timeouts([r for r in range(8) if r != 5], 812),
            "[rank5]: RuntimeError: DataLoader timed out after 600 seconds",
        ],
    ),
    "mismatch": (
        "timeout/asymmetric-collectives",
        [
            "[rank1]: RuntimeError: Detected mismatch between "
            "collectives on ranks. Rank 1 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=88, OpType=ALLREDUCE, "
            "TensorShape=[1024], TensorDtypes=Float), "
            "but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=88, OpType=BROADCAST, "
            "TensorShape=[1], TensorDtypes=Long).",
        ],
    ),
    "ddp-unused": (
        "timeout/asymmetric-collectives",
        [
            "[rank0]: RuntimeError: Expected to have finished reduction "
            "in the prior iteration before starting a "
            "new one. This error indicates that your module has "
            "parameters that were not used in producing loss.",
            "Parameter indices which did not receive grad for rank 0: 211 212",
        ],
    ),
    "oom-one-rank": (
        "cuda/oom",
        [
            "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried "
            "to allocate 1.95 GiB. GPU 3 has a total "
            "capacity of 79.11 GiB of which 1.02 GiB is free.",
            *_timeouts([0, 1, 2, 4, 5, 6, 7], 5511),
        ],
    ),
    "device-assert": (
        "cuda/illegal-access",
        [
            "/opt/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1289: "
            "indexSelectLargeIndex: block: [201,0,0], "
            "thread: [31,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
            "[rank6]: RuntimeError: CUDA error: device-side assert triggered",
            *_timeouts([0, 1, 2, 3], 77),
        ],
    ),
    "host-oom": (
        "system/host-oom",
        [
            "Nov 29 03:40:01 gpu-node-003 kernel: Out of memory: Killed process 4003 (python3) "
            "total-vm:1200000000kB, anon-rss:500000000kB",
            "[rank0]:[E1129 03:41:00.000000000 "
            "ProcessGroupNCCL.cpp:1300] NCCL communicator was aborted on rank 0.",
            "  exitcode  : -9 (pid: 4003)  (SIGKILL)",
        ],
    ),
    "port-in-use": (
        "rendezvous/store",
        [
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            "address. The server socket has failed to bind to "
            "[::]:29500 (errno: 98 - Address already in use).",
        ],
    ),
    "master-unreachable": (
        "rendezvous/store",
        [
            "[W1129 03:00:20.000000000 socket.cpp:700] [c10d] The client socket has failed to connect to "
            "[trainer-master]:29500 (errno: 111 - Connection refused).",
            "torch.distributed.DistNetworkError: The client socket has "
            "timed out after 900000ms while trying to "
            "connect to (trainer-master, 29500).",
        ],
    ),
    "duplicate-gpu": (
        "config/duplicate-gpu",
        [
            "torch.distributed.DistBackendError: NCCL error in: "
            "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
            "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5",
            "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
            "Last error:",
            "Duplicate GPU detected : rank 3 and rank 1 both on CUDA device 3b000",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXCERPTS))
def test_excerpt_is_diagnosed_as_its_class(tmp_path: Path, name: str) -> None:
    expected, lines = EXCERPTS[name]
    path = tmp_path / f"{name}.log"
    path.write_text("\n".join(lines) + "\n")
    diagnosis = diagnose([str(path)]).diagnosis
    assert diagnosis.primary.class_id == expected, [d.class_id for d in diagnosis.diagnoses]
    assert diagnosis.primary.evidence, "the verdict must cite lines"
