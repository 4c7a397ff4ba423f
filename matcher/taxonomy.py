"""Root-cause class ids (../shared/TAXONOMY.md is the contract) with a short human title each."""

from __future__ import annotations

UNKNOWN = "unknown"

CLASSES: dict[str, str] = {
    "timeout/straggler-input": "Straggler rank slowed by input (data loading, preprocessing, uneven shards)",
    "timeout/rank0-only-work": "Rank 0 did long solo work (checkpoint, eval, tokenization) past the timeout",
    "timeout/asymmetric-collectives": "Ranks issued different collectives (mismatched sequence, op or shape)",
    "timeout/jit-compile": "JIT compilation (torch.compile, Triton, fused kernels) outlasted the timeout",
    "network/interface-selection": "NCCL/Gloo bound to the wrong network interface",
    "network/ib-rdma": "InfiniBand / RoCE transport error",
    "network/roce-gid": "RoCE GID index mismatch",
    "network/efa-ofi": "AWS EFA / aws-ofi-nccl / libfabric problem",
    "network/peer-exit": "A remote rank exited first; this rank only lost its peer",
    "p2p/pcie-acs": "PCIe peer-to-peer failure (ACS/IOMMU, no P2P support, virtualised PCIe)",
    "shm/dev-shm": "/dev/shm too small for NCCL's shared-memory transport",
    "hardware/gpu-xid": "GPU or NVLink hardware fault (Xid, ECC, fallen off the bus)",
    "system/fabric-manager": "NVSwitch fabric manager not running or mismatched with the driver",
    "system/memlock": "Locked-memory limit (ulimit -l) too low for RDMA registration",
    "system/host-oom": "A rank was killed by the host / cgroup OOM killer",
    "config/duplicate-gpu": "Several ranks on the same GPU",
    "config/version-mismatch": "NCCL / CUDA / driver / PyTorch version incompatibility",
    "rendezvous/store": "Rendezvous / TCPStore / MASTER_ADDR:MASTER_PORT failure",
    "cuda/oom": "CUDA out of memory on a rank",
    "cuda/illegal-access": "Illegal memory access or device-side assert in a kernel",
    "nccl/nvls-or-algorithm": "Bug in a specific NCCL algorithm or feature (NVLS, CollNet, cuMem)",
    # Added by the project (TAXONOMY.md allows new family/name ids): decided across ranks, not by one line.
    "application/python-exception": "An ordinary Python exception on one rank ended the job first",
    UNKNOWN: "No known root cause found in these logs",
}


def title(class_id: str) -> str:
    return CLASSES.get(class_id, class_id)
