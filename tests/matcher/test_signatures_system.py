"""NCCL/system-side signatures through the whole matcher: what they extract and how they rank.

Each test writes a small, realistic log (invented for the test) and runs `matcher.pipeline.diagnose`, so it
checks the signatures as the product uses them: prefix peeling, prefilter, patterns, and the analysis that
weighs a specific line against a generic one and a root line against what the surviving ranks say.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.model import Diagnosis
from matcher.pipeline import diagnose


def _diagnose(tmp_path: Path, *files: tuple[str, str]) -> Diagnosis:
    paths = []
    for name, text in files:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(str(path))
    return diagnose(paths).diagnosis


def _classes(diagnosis: Diagnosis) -> list[str]:
    return [score.class_id for score in diagnosis.diagnoses]


def _signatures(diagnosis: Diagnosis) -> set[str]:
    return {e.signature for score in diagnosis.diagnoses for e in score.evidence}


WATCHDOG = (
    "[rank{r}]:[E314 03:21:40.123456789 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
    "Timeout(ms)=600000) ran for 600041 milliseconds before timing out.\n"
)


@pytest.mark.parametrize(
    ("line", "xid", "device"),
    [
        # current open driver: pid and name
        (
            "Mar 14 03:11:40 gpu-b kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=28871, name=python, "
            "GPU has fallen off the bus.",
            79,
            "0000:3b:00",
        ),
        # older drivers: no name=
        (
            "[1234567.890123] NVRM: Xid (PCI:0000:2a:00): 64, pid=7712, Row Remapper: Failed to remap row",
            64,
            "0000:2a:00",
        ),
        # MIG compute instance, dmesg -T time
        (
            "[Fri Mar 14 03:11:40 2025] NVRM: Xid (PCI:0000:b7:00 GPU-I:01 GPU-CI:00): 94, pid=4410, "
            "name=python3, Contained: SM (0x1). RST: No, D-RST: No",
            94,
            "0000:b7:00",
        ),
        # NVLink error, unknown pid
        (
            "kernel: NVRM: Xid (PCI:0000:18:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error "
            "detected on link 2(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
            74,
            "0000:18:00",
        ),
    ],
)
def test_hardware_xid_forms_name_the_class_and_extract_code_and_bus(
    tmp_path: Path, line: str, xid: int, device: str
) -> None:
    diagnosis = _diagnose(tmp_path, ("dmesg.log", line + "\n"))
    assert diagnosis.primary.class_id == "hardware/gpu-xid"
    assert diagnosis.facts.get("xid") == xid
    assert diagnosis.facts.get("device") == device


def test_application_xid_is_weaker_than_the_illegal_access_it_accompanies(tmp_path: Path) -> None:
    log = (
        "kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=28871, name=python, Graphics SM Warp Exception on "
        "(GPC 1, TPC 0, SM 1): Out Of Range Address\n"
        "[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    diagnosis = _diagnose(tmp_path, ("rank3.log", log))
    assert diagnosis.primary.class_id == "cuda/illegal-access"


def test_xid_on_one_host_outranks_the_timeouts_of_every_other_rank(tmp_path: Path) -> None:
    timeouts = "".join(WATCHDOG.format(r=r) for r in range(8) if r != 5)
    kernel = (
        "Mar 14 03:11:40 gpu-node-b kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=28871, name=python, "
        "GPU has fallen off the bus.\n"
        "Mar 14 03:11:40 gpu-node-b kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
    )
    diagnosis = _diagnose(tmp_path, ("train.log", timeouts), ("gpu-node-b/kern.log", kernel))
    assert diagnosis.primary.class_id == "hardware/gpu-xid"
    assert diagnosis.symptom == "collective-timeout"
    assert diagnosis.culprit is not None
    assert diagnosis.culprit.hosts == ("gpu-node-b",)


def test_bridge_interface_and_refused_connect_name_interface_selection(tmp_path: Path) -> None:
    log = (
        "node-a:2301:2301 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>\n"
        "node-a:2301:2301 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal "
        "implementation\n"
        "node-a:2301:2301 [0] NCCL INFO NET/IB : No device found.\n"
        "node-a:2301:2301 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>\n"
        "node-a:2301:2301 [0] NCCL INFO Using network Socket\n"
        "\n"
        "node-a:2301:2377 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
        "172.17.0.1<43119> failed : Connection refused\n"
        "node-a:2301:2377 [0] NCCL INFO misc/socket.cc:565 -> 2\n"
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: "
        "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO "
        "for details), NCCL version 2.19.3\n"
    )
    diagnosis = _diagnose(tmp_path, ("rank0.log", log))
    assert diagnosis.primary.class_id == "network/interface-selection"
    assert diagnosis.facts.get("interface") == "docker0"
    assert diagnosis.facts.get("ip") == "172.17.0.1"


def test_healthy_nccl_init_lines_are_not_evidence(tmp_path: Path) -> None:
    log = (
        "gpu-1:811:811 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.11<0>\n"
        "gpu-1:811:811 [0] NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v8)\n"
        "gpu-1:811:811 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.14.0\n"
        "gpu-1:811:811 [0] NCCL INFO NET/OFI Using Libfabric version 1.22\n"
        "gpu-1:811:811 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)\n"
        "gpu-1:811:811 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.8.0.11<0>\n"
        "gpu-1:811:811 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n"
        "gpu-1:811:811 [0] NCCL INFO NVLS multicast support is available on dev 0\n"
        "gpu-1:811:900 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
        "gpu-1:811:900 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n"
        "gpu-1:811:900 [0] NCCL INFO Connected all rings\n"
        "gpu-1:811:811 [0] NCCL INFO NET/Socket : Using [0]eno1:10.0.0.11<0> [1]virbr0:192.168.122.1<0>\n"
        "gpu-1:811:811 [0] NCCL INFO P2P is disabled between connected GPUs 2 and 3. You can repress this "
        "message with NCCL_IGNORE_DISABLED_P2P=1.\n"
        "gpu-1:811:900 [0] graph/search.cc:1050 NCCL WARN Could not find a path for pattern 4, falling back "
        "to simple order\n"
        "gpu-1:811:811 [0] NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin_v6 symbol.\n"
        "gpu-1:811:811 [0] NCCL INFO cudaDriverVersion 12040\n"
        "gpu-1:811:811 [0] NCCL INFO comm 0x55d0 rank 0 nranks 16 cudaDev 0 busId 18000 - Init COMPLETE\n"
    )
    diagnosis = _diagnose(tmp_path, ("gpu-1.log", log))
    # Setup lines and nothing after them: only suggestions of what to check for a hang after init
    # (matcher.analysis.setup_hang): low-confidence guesses, no culprit, `unknown` listed among them.
    assert all(c.confidence <= 0.45 for c in diagnosis.diagnoses)
    assert "unknown" in [c.class_id for c in diagnosis.diagnoses]
    assert diagnosis.culprit is None


def test_a_root_line_outranks_what_the_survivors_say_about_their_peer(tmp_path: Path) -> None:
    survivor = (
        "gpu-2:4411:4470 [0] misc/socket.cc:47 NCCL WARN socketProgress: Connection closed by remote peer "
        "gpu-3<48211>\n"
        "[rank4]: torch.distributed.DistBackendError: NCCL error in: "
        "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, remote process exited or there was a network "
        "error, NCCL version 2.21.5\n"
        "[rank4]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
        "prematurely.\n"
    )
    dead = (
        "gpu-3:990:1010 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
        "10.0.0.2<45678> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
    )
    with_root = _diagnose(tmp_path / "a", ("rank4.log", survivor), ("rank9.log", dead))
    assert with_root.primary.class_id == "network/ib-rdma"
    assert "network/peer-exit" in _classes(with_root)[1:]
    assert with_root.facts.get("error_code") == 12
    assert with_root.facts.get("vendor_err") == 129

    alone = _diagnose(tmp_path / "b", ("rank4.log", survivor))
    assert alone.primary.class_id == "network/peer-exit"
    assert alone.symptom in {"remote-error", "peer-closed", "nccl-error"}


def test_generic_cuda_failure_does_not_outrank_a_specific_transport_error(tmp_path: Path) -> None:
    log = (
        "node-x:7311:7390 [5] transport/p2p.cc:300 NCCL WARN Cuda failure 'invalid argument'\n"
        "node-x:7311:7390 [5] misc/ibvwrap.cc:291 NCCL WARN Call to ibv_modify_qp failed with error No such "
        "device\n"
    )
    diagnosis = _diagnose(tmp_path, ("rank7.log", log))
    assert diagnosis.primary.class_id == "network/roce-gid"


def test_memory_registration_enomem_is_memlock_not_a_generic_verbs_failure(tmp_path: Path) -> None:
    log = (
        "node1:88:120 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate "
        "memory\n"
        "node1:88:120 [0] NCCL INFO transport/net_ib.cc:1120 -> 2\n"
    )
    diagnosis = _diagnose(tmp_path, ("rank0.log", log))
    assert diagnosis.primary.class_id == "system/memlock"
    assert "network/ib-rdma" not in _classes(diagnosis)


def test_nvls_bind_failure_is_the_algorithm_with_fabric_manager_as_runner_up(tmp_path: Path) -> None:
    log = (
        "[2025-09-09 09:09:09] h100-ci-4:881:990 [3] transport/nvls.cc:160 NCCL WARN Failed to bind NVLink "
        "SHARP (NVLS) Multicast memory: CUDA error 401\n"
    )
    diagnosis = _diagnose(tmp_path, ("ci.log", log))
    assert _classes(diagnosis)[:2] == ["nccl/nvls-or-algorithm", "system/fabric-manager"]
    assert diagnosis.facts.get("error_code") == 401


def test_shm_transport_system_error_and_cuda_error_point_at_different_classes(tmp_path: Path) -> None:
    full_shm = (
        "pod-0:77:120 [1] misc/shmutils.cc:130 NCCL WARN Error while creating shared memory segment "
        "/dev/shm/nccl-a1B2c3 (size 9637888), error: No space left on device (28)\n"
        "pod-0:77:120 [1] NCCL INFO transport/shm.cc:114 -> 2\n"
    )
    register_bug = (
        "node-x:7311:7390 [5] NCCL INFO Channel 00 : 21[5] -> 64[0] via direct shared memory\n"
        "node-x:7311:7390 [5] include/shm.h:47 NCCL WARN Cuda failure 'invalid argument'\n"
        "node-x:7311:7390 [5] NCCL INFO transport/shm.cc:205 -> 1\n"
    )
    assert _diagnose(tmp_path / "a", ("a.log", full_shm)).primary.class_id == "shm/dev-shm"
    assert _diagnose(tmp_path / "b", ("b.log", register_bug)).primary.class_id == "nccl/nvls-or-algorithm"


def test_fabric_manager_802_forms(tmp_path: Path) -> None:
    log = (
        "[rank0]: RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
        "before calling NumCudaDevices() that might have already set an error? Error 802: system not yet "
        "initialized\n"
    )
    diagnosis = _diagnose(tmp_path, ("rank0.log", log))
    assert diagnosis.primary.class_id == "system/fabric-manager"
    assert {"cuda-802-system-not-ready", "cuda-error-802-code"} <= _signatures(diagnosis)


def test_efa_plugin_skew_is_efa_even_though_nccl_falls_back_to_sockets(tmp_path: Path) -> None:
    log = (
        "ip-10-1-2-3:88:88 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : "
        "/opt/amazon/efa/lib/libfabric.so.1: version `FABRIC_1.8' not found (required by "
        "/opt/amazon/ofi-nccl/lib/libnccl-net.so)\n"
        "ip-10-1-2-3:88:88 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal "
        "implementation\n"
        "ip-10-1-2-3:88:88 [0] NCCL INFO NET/Socket : Using [0]ens32:10.1.2.3<0>\n"
        "ip-10-1-2-3:88:88 [0] NCCL INFO Using network Socket\n"
    )
    diagnosis = _diagnose(tmp_path, ("rank0.log", log))
    assert diagnosis.primary.class_id == "network/efa-ofi"


def test_illegal_access_caught_by_nccl_alone_points_at_nccl_but_yields_to_kernel_asserts(
    tmp_path: Path,
) -> None:
    nccl_only = (
        "[2025-06-01 10:00:00] box:5120:5120 [2] enqueue.cc:1600 NCCL WARN Cuda failure 700 'an illegal "
        "memory access was encountered'\n"
        "box:5120:5120 [2] NCCL INFO group.cc:250 -> 1\n"
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: an illegal memory access was encountered\n"
    )
    diagnosis = _diagnose(tmp_path / "a", ("rank2.log", nccl_only))
    assert _classes(diagnosis)[:2] == ["nccl/nvls-or-algorithm", "cuda/illegal-access"]

    user_kernel = (
        "/opt/src/loss.cu:88: scatter_kernel: block: [0,0,0], thread: [3,0,0] Assertion `idx < n` failed.\n"
        "[rank2]: RuntimeError: CUDA error: device-side assert triggered\n" + nccl_only
    )
    diagnosis = _diagnose(tmp_path / "b", ("rank2.log", user_kernel))
    assert diagnosis.primary.class_id == "cuda/illegal-access"


def test_an_unreachable_peer_names_the_class_without_blaming_the_rank_that_reports_it(tmp_path: Path) -> None:
    timeouts = "".join(WATCHDOG.format(r=r) for r in range(4))
    unreachable = (
        "node-4:1190:1301 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
        "192.168.19.14<52822> failed : No route to host\n"
    )
    diagnosis = _diagnose(tmp_path, ("train.log", timeouts + unreachable))
    assert diagnosis.primary.class_id == "network/interface-selection"
    assert diagnosis.culprit is None
    assert diagnosis.facts.get("peer") == "192.168.19.14"


def test_loopback_is_evidence_only_when_it_implies_a_multi_host_misresolution(tmp_path: Path) -> None:
    one_host = (
        "[rank1]: RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
        "closed by peer [127.0.0.1]:29811\n"
    )
    assert _diagnose(tmp_path / "a", ("rank1.log", one_host)).primary.class_id == "network/peer-exit"

    many_hosts = (
        "[rank9]: RuntimeError: Gloo connectFullMesh failed with "
        "[/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n"
        "  (rank=9, size=24, local=[127.0.0.1])\n"
    )
    diagnosis = _diagnose(tmp_path / "b", ("rank9.log", many_hosts))
    assert diagnosis.primary.class_id == "network/interface-selection"
    assert diagnosis.facts.get("world_size") == 24
