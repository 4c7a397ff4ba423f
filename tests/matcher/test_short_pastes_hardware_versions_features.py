"""Wordings real users paste for GPU hardware, fabric manager, PCIe P2P, version and NCCL-feature failures.

Each excerpt is invented for the test (hosts, pids, addresses and versions are made up) but follows the shape
of what public issue threads show for these failures: short pastes of a few lines, often from a tool other
than the training job (nvidia-smi, lspci, the Kubernetes device plugin, numba, systemd). The whole matcher
runs on them, so the tests check what the product answers, not just that a regex fires.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.matcher.excerpts import class_ids, diagnose_text

XID45 = (
    "[Tue May 12 04:01:1{s} 2026] NVRM: Xid (PCI:0000:{bus}:00): 45, pid={pid}, name=python3, Ch 0000000{ch} "
)
HARDWARE_CLEANUP_XIDS = (
    XID45.format(s=0, bus="4c", pid=99120, ch=2)
    + "caused by previous Xid 144\n"
    + XID45.format(s=0, bus="5d", pid=99121, ch=7)
    + "caused by previous Xid 144\n"
    + XID45.format(s=1, bus="4c", pid=99120, ch=3)
    + "caused by previous Xid 144\n"
)

APPLICATION_CLEANUP_XIDS = (
    "[Tue May 12 04:01:10 2026] NVRM: Xid (PCI:0000:4c:00): 13, pid=99120, name=python3, "
    "Graphics SM Warp Exception on (GPC 2, TPC 1, SM 0): Out Of Range Address\n"
    + XID45.format(s=0, bus="4c", pid=99120, ch=2)
    + "caused by previous Xid 13\n"
)

RESET_REQUIRED = (
    "Test CUDA failure common.cu:1012 'CUDA-capable device(s) is/are busy or unavailable'\n"
    "[Wed Feb  4 11:20:33 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required "
    "[NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2911\n"
)

GPU_UUID = "GPU-9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
DEVICE_PLUGIN = (
    "I0302 17:40:11.402117       1 health.go:160] Processing event {Device:{Handle:0x7f3a10} EventType:8 "
    "EventData:79 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
    f"I0302 17:40:11.402201       1 health.go:186] XidCriticalError: Xid=79 on Device={GPU_UUID}; "
    "marking device as unhealthy.\n"
    f"I0302 17:40:11.402250       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {GPU_UUID}\n"
)

NCCL_UNKNOWN_999 = """\
trainer-3:5120:5190 [0] include/alloc.h:121 NCCL WARN Cuda failure 999 'unknown error'
trainer-3:5120:5190 [0] NCCL INFO include/alloc.h:201 -> 1
trainer-3:5120:5190 [0] NCCL INFO init.cc:1550 -> 1
"""


SMI_ERR = (
    "+-----------------------------------------------------------------------------+\n"
    "|   2  NVIDIA H100 80GB HBM3    On  | 00000000:5D:00.0 Off |                 ERR! |\n"
    "| ERR!   49C    P0   ERR! / 700W |  61233MiB / 81559MiB |    ERR!      Default |\n"
)


@pytest.mark.parametrize(
    "text",
    [HARDWARE_CLEANUP_XIDS, RESET_REQUIRED, DEVICE_PLUGIN, NCCL_UNKNOWN_999, SMI_ERR],
    ids=[
        "xid45-after-nvlink-xid",
        "nv-err-reset-required",
        "k8s-device-plugin",
        "cuda-failure-999",
        "nvidia-smi-err",
    ],
)
def test_hardware_faults_in_their_other_wordings(tmp_path: Path, text: str) -> None:
    assert class_ids(diagnose_text(tmp_path, text))[0] == "hardware/gpu-xid"


def test_cleanup_after_hardware_xid_names_the_hardware_xid(tmp_path: Path) -> None:
    diagnosis = diagnose_text(tmp_path, HARDWARE_CLEANUP_XIDS)
    assert diagnosis.facts.get("xid") == 144
    assert diagnosis.facts.get("device") == "0000:4c:00"


def test_cleanup_after_application_xid_stays_an_application_fault(tmp_path: Path) -> None:
    # Xid 45 caused by Xid 13 is the application's own bad access: no hardware reading may win.
    assert class_ids(diagnose_text(tmp_path, APPLICATION_CLEANUP_XIDS))[0] == "cuda/illegal-access"


FABRIC_PASTES = {
    "numba-cuinit": (
        "numba.cuda.cudadrv.error.CudaSupportError: Error at driver init:\n"
        "[802] Call to cuInit results in UNKNOWN_CUDA_ERROR\n"
    ),
    "fm-version-check": (
        "Apr 02 09:14:55 hgx-node-11 systemd[1]: Starting NVIDIA fabric manager service...\n"
        "Apr 02 09:14:55 hgx-node-11 nv-fabricmanager[7781]: fabric manager NVIDIA GPU driver interface "
        "version 570.133.20 don't match with driver version 570.124.06. Please update with matching NVIDIA "
        "driver package.\n"
    ),
    "mnnvl-imex": (
        "nvl72-r4-n11:6020:6081 [0] NCCL WARN MNNVL (cliqueSize 72) is available but not working on this "
        "system. Check the IMEX channel configuration (/dev/nvidia-caps-imex-channels). "
        "Set NCCL_MNNVL_ENABLE=0 to ignore this issue.\n"
    ),
    "smi-fabric-in-progress": (
        "root@hgx-node-11:~# nvidia-smi -q -i 0 | grep -A 2 Fabric\n"
        "    Fabric\n"
        "        State                             : In Progress\n"
        "        Status                            : N/A\n"
    ),
    "fm-unit-missing": (
        "root@hgx-node-11:~# systemctl status nvidia-fabricmanager\n"
        "Unit nvidia-fabricmanager.service could not be found.\n"
    ),
    "fm-named-missing": "CUDA init on the DLAMI fails with error 802 owing to lack of nvidia-fabricmanager\n",
}


@pytest.mark.parametrize("name", sorted(FABRIC_PASTES))
def test_fabric_manager_pastes(tmp_path: Path, name: str) -> None:
    assert class_ids(diagnose_text(tmp_path, FABRIC_PASTES[name]))[0] == "system/fabric-manager"


P2P_PASTES = {
    "lspci-acs": (
        "$ sudo lspci -vvv | grep -i acsctl\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
        "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
    ),
    "p2p-matrix": (
        "Device=0 CAN Access Peer Device=1\n"
        "Device=0 CANNOT Access Peer Device=2\n"
        "Device=0 CANNOT Access Peer Device=3\n"
        "Device=2 CANNOT Access Peer Device=0\n"
    ),
    "truncated-peer-access": "[engine] error: peer access is not supported between these two device\n",
    "topo-p2p-matrix": (
        "$ nvidia-smi topo -p2p r\n"
        " \tGPU0\tGPU1\tGPU2\tGPU3\n"
        " GPU0\tX\tOK\tCNS\tCNS\n"
        " GPU1\tOK\tX\tCNS\tCNS\n"
        "Legend:\n"
        "  X    = Self\n"
        "  OK   = Status Ok\n"
        "  CNS  = Chipset not supported\n"
    ),
}


@pytest.mark.parametrize("name", sorted(P2P_PASTES))
def test_p2p_pastes(tmp_path: Path, name: str) -> None:
    assert class_ids(diagnose_text(tmp_path, P2P_PASTES[name]))[0] == "p2p/pcie-acs"


def test_healthy_topo_p2p_matrix_is_not_evidence(tmp_path: Path) -> None:
    text = (
        " GPU0\tX\tOK\tOK\n"
        " GPU1\tOK\tX\tOK\n"
        "Legend:\n"
        "  CNS  = Chipset not supported\n"
        "  GNS  = GPU not supported\n"
        "  TNS  = Topology not supported\n"
        "  NS   = Not supported\n"
    )
    assert "p2p/pcie-acs" not in class_ids(diagnose_text(tmp_path, text))


def test_completed_fabric_is_not_evidence(tmp_path: Path) -> None:
    text = "    Fabric\n        State                             : Completed\n        Status  : Success\n"
    assert "system/fabric-manager" not in class_ids(diagnose_text(tmp_path, text))


def test_acs_disabled_everywhere_is_not_evidence(tmp_path: Path) -> None:
    text = (
        "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
        "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
    )
    assert "p2p/pcie-acs" not in class_ids(diagnose_text(tmp_path, text))


VERSION_PASTES = {
    "nvml-capital-l": "$ nvidia-smi\nFailed to initialize NVML: Driver/Library version mismatch\n",
    "url-encoded-symbol": (
        "import failed: torch/lib/libtorch_cuda.so:%20undefined%20symbol:%20ncclCommRegister\n"
    ),
    "nccl-without-arch": (
        "(TrainActor pid=8812) ws-blk:8812:8812 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "(TrainActor pid=8812) ws-blk:8812:8890 [0] enqueue.cc:1581 NCCL WARN "
        "Cuda failure 'named symbol not found'\n"
    ),
    "windows-wheel-spawn": (
        "-- Process 0 terminated with the following error:\n"
        "Traceback (most recent call last):\n"
        '  File "C:\\envs\\tts\\lib\\site-packages\\torch\\distributed\\distributed_c10d.py", line 727, '
        "in _new_process_group_helper\n"
        '    raise RuntimeError("Distributed package doesn\'t have NCCL " "built in")\n'
        "RuntimeError: Distributed package doesn't have NCCL built in\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 4120) "
        "of binary: C:\\envs\\tts\\python.exe\n"
    ),
}


@pytest.mark.parametrize("name", sorted(VERSION_PASTES))
def test_version_mismatch_pastes(tmp_path: Path, name: str) -> None:
    assert class_ids(diagnose_text(tmp_path, VERSION_PASTES[name]))[0] == "config/version-mismatch"


def test_garbled_bootstrap_address_keeps_version_mismatch_in_the_running(tmp_path: Path) -> None:
    text = (
        "node-a:3301:3301 [0] NCCL INFO NCCL version 2.20.5+cuda12.4\n"
        "node-a:3301:3377 [0] misc/socket.cc:484 NCCL WARN ncclSocketInit: connecting to address  "
        "with family 0 is neither AF_INET(2) nor AF_INET6(10)\n"
    )
    classes = class_ids(diagnose_text(tmp_path, text))
    assert classes[0] == "network/interface-selection"
    assert "config/version-mismatch" in classes[:3]


def test_peer_access_error_in_shm_transport_is_the_cumem_host_feature(tmp_path: Path) -> None:
    # The same CUDA error from the P2P transport stays a P2P finding; from the SHM transport it is NCCL's
    # cuMem host-memory path, which NCCL_CUMEM_HOST_ENABLE=0 avoids.
    shm = (
        "[2026-02-11 04:05:06] l4-node:7301:7388 [0] transport/shm.cc:596 NCCL WARN Cuda failure 217 "
        "'peer access is not supported between these two devices'\n"
    )
    p2p = shm.replace("transport/shm.cc:596", "transport/p2p.cc:271")
    shm_classes = class_ids(diagnose_text(tmp_path, shm))
    assert shm_classes[0] == "nccl/nvls-or-algorithm"
    assert "p2p/pcie-acs" in shm_classes[:3]
    assert class_ids(diagnose_text(tmp_path, p2p))[0] == "p2p/pcie-acs"


def test_nvls_bind_failure_hint_text_is_not_a_fabric_manager_report(tmp_path: Path) -> None:
    # Recent NCCL appends a stock hint naming the Fabric Manager to every NVLS bind failure; pasted on one
    # line it must not turn the NVLS failure into a fabric-manager finding, which stays the runner-up.
    text = (
        "gpu-ci-7:2201:2290 [3] transport/nvls.cc:380 NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast "
        "memory of size 4194304 : CUDA error 401 'the operation cannot be performed in the present state'. "
        "This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches. "
        "Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future.\n"
    )
    classes = class_ids(diagnose_text(tmp_path, text))
    assert classes[0] == "nccl/nvls-or-algorithm"
    assert "system/fabric-manager" in classes[:3]


def test_an_illegal_access_caught_by_nccls_allocator_blames_an_earlier_kernel(tmp_path: Path) -> None:
    text = (
        "gpu-ws:51120:51188 [2] include/alloc.h:124 NCCL WARN Cuda failure 700 "
        "'an illegal memory access was encountered'\n"
        "gpu-ws:51120:51188 [2] NCCL INFO include/alloc.h:245 -> 1\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "cuda/illegal-access"


def test_an_illegal_access_caught_at_nccls_kernel_launch_suspects_the_release(tmp_path: Path) -> None:
    text = (
        "[2025-05-04 10:00:01] ws-5090:7001:7001 [1] enqueue.cc:1556 NCCL WARN Cuda failure 700 "
        "'an illegal memory access was encountered'\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "nccl/nvls-or-algorithm"


def test_rings_that_do_not_close_point_at_the_nccl_release(tmp_path: Path) -> None:
    text = (
        "dgx-07:3312:3390 [5] graph/rings.cc:38 NCCL WARN Error : ring 1 does not loop back to start "
        "(4 != 5)\n"
        "dgx-07:3312:3390 [5] NCCL INFO graph/connect.cc:281 -> 3\n"
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, "
        "internal error, NCCL version 2.19.3\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "nccl/nvls-or-algorithm"
