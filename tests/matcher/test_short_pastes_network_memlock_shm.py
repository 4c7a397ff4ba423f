"""Short excerpts shaped like what users paste into issue threads, for the network / memlock / shm classes.

Every excerpt is invented for this file (hosts, pids, addresses and sizes are made up) but follows the
wording real NCCL, Gloo, UCX, libfabric and verbs-based stacks print, including older and newer versions:
the point is that a five-line paste with one telling line lands on the right class.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.matcher.excerpts import class_ids, diagnose_text

EXCERPTS: dict[str, tuple[str, str]] = {
    # A vendor IB plugin tags its transport "NET/IBP" instead of "NET/IB".
    "ib-plugin-tag": (
        "network/ib-rdma",
        "[2025-05-02 10:11:12] NET/IBP:Got completion from peer 10.88.1.7<41877> with status=12 "
        "opcode=32700 len=32700 vendor err 129 (Send)\n"
        "dl-n3:4410:4470 [1] NCCL INFO transport/net.cc:1140 -> 6\n",
    ),
    # NCCL 2.19+ names the HCA port before the async event; 2.2x reports QP faults as fatal events.
    "ib-async-device-named": (
        "network/ib-rdma",
        "iter 5120 | loss 2.0113 | lr 2.9e-4\n"
        "h-17:30211:30290 [3] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_3:1 Got async event : "
        "local access violation work queue error\n"
        "h-17:30211:30290 [3] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_3:1 Got async event : "
        "local access violation work queue error\n",
    ),
    "ib-async-fatal-qp": (
        "network/ib-rdma",
        "[2026-02-11 04:05:06] h-17:30211:30299 [5] transport/net_ib.cc:180 NCCL WARN NET/IB : mlx5_ib5:1 "
        "async fatal event on QP (0x7fa1c0042b10): invalid request local work queue error\n",
    ),
    # RDMA stacks other than NCCL word the RTR failure as "ibv_modify_qp failed (errno N)".
    "roce-modify-qp-errno": (
        "network/roce-gid",
        "what():  ibv_modify_qp failed (errno 19) (Ib failure: No such device)\nAborted (core dumped)\n",
    ),
    "roce-version-read": (
        "network/roce-gid",
        "I0702 09:00:01.000100  812 rdma_io.cc:40] Using OOB interface eth0 with IP 10.5.0.12\n"
        "W0702 09:00:01.004000  812 rdma_util.h:547] NET/IB: read failed in ncclIbRoceGetVersionNum: "
        "Invalid argument\n"
        "F0702 09:00:01.004100  812 rdma_util.h:592] Check failed: ncclIbRoceGetVersionNum(dev, port, "
        "idx, &ver)\n",
    ),
    # UCX prints the verbs call with its arguments.
    "memlock-ucx-create-cq": (
        "system/memlock",
        "[1716000000.101010] [cn-31:99120:0]        ib_iface.c:980  UCX  ERROR ibv_create_cq(cqe=4096) "
        "failed: Cannot allocate memory\n"
        "[cn-31:99120] *** Process received signal ***\n",
    ),
    # NCCL before 2.8 gave no errno for a failed CQ/QP creation; the usual reason is the memlock limit.
    "memlock-bare-create-qp": (
        "system/memlock",
        "[1,2]<stdout>:box-5:8120:8180 [2] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_create_qp failed\n"
        "[1,2]<stdout>:box-5:8120:8180 [2] NCCL INFO transport/net_ib.cc:360 -> 2\n"
        "Failed, NCCL error all_reduce.c:77 'unhandled system error'\n",
    ),
    # NCCL 2.2-2.3: every interface it will use is listed; loopback among them breaks multi-host jobs.
    "interface-old-nccl-loopback": (
        "network/interface-selection",
        "m-2:5512:5560 [0] NCCL INFO NET : Using interface lo:127.0.0.1<0>\n"
        "m-2:5512:5560 [0] NCCL INFO NET : Using interface enp5s0:10.9.8.2<0>\n"
        "m-2:5512:5560 [0] NCCL INFO NET/Socket : 2 interfaces found\n"
        "m-2:5513:5562 [1] include/socket.h:361 NCCL WARN Call to connect timeout : Connection refused\n",
    ),
    # vLLM / sglang / verl build Gloo CPU groups; across hosts the wrong interface makes the mesh fail.
    "interface-gloo-full-mesh": (
        "network/interface-selection",
        '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 1953, '
        "in _new_process_group_helper\n"
        "    backend_class = ProcessGroupGloo(\n"
        "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] "
        "no error\n",
    ),
}


@pytest.mark.parametrize("name", sorted(EXCERPTS))
def test_pasted_excerpt_lands_on_its_class(tmp_path: Path, name: str) -> None:
    expected, text = EXCERPTS[name]
    classes = class_ids(diagnose_text(tmp_path, text))
    assert classes and classes[0] == expected, classes


def test_early_retry_timeout_keeps_roce_gid_as_a_candidate_behind_ib(tmp_path: Path) -> None:
    # Old NCCL prints no GIDs, so the line cannot tell RoCE from IB: the transport error leads and a GID
    # mismatch (the usual cause on RoCE) stays among the suggestions.
    text = (
        "w-1:946:990 [0] NCCL INFO Channel 00 : 0[0] -> 8[0] [send] via NET/IB/0\n"
        "w-1:946:990 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 1, "
        "len 0, vendor err 129\n"
    )
    classes = class_ids(diagnose_text(tmp_path, text))
    assert classes[0] == "network/ib-rdma"
    assert "network/roce-gid" in classes[:3]


def test_retry_timeout_with_routable_roce_v2_gid_does_not_suggest_gid(tmp_path: Path) -> None:
    text = (
        "w-1:946:990 [0] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.4.0.9<40001> with "
        "status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.4.0.1 remoteGids::ffff:10.4.0.9\n"
    )
    classes = class_ids(diagnose_text(tmp_path, text))
    assert classes[0] == "network/ib-rdma"
    assert "network/roce-gid" not in classes


def test_create_qp_with_a_non_memory_errno_stays_an_ib_failure(tmp_path: Path) -> None:
    text = (
        "box-5:8120:8180 [2] misc/ibvwrap.cc:112 NCCL WARN Call to ibv_create_qp failed with error "
        "Invalid argument\n"
    )
    classes = class_ids(diagnose_text(tmp_path, text))
    assert classes[0] == "network/ib-rdma"
    assert "system/memlock" not in classes


def test_healthy_old_nccl_interface_listing_is_not_a_failure(tmp_path: Path) -> None:
    text = (
        "m-2:5512:5560 [0] NCCL INFO NET : Using interface enp5s0:10.9.8.2<0>\n"
        "m-2:5512:5560 [0] NCCL INFO NET/Socket : 1 interfaces found\n"
        "m-2:5512:5560 [0] NCCL INFO Ring 00 :    0   1\n"
    )
    assert "network/interface-selection" not in class_ids(diagnose_text(tmp_path, text))


def test_bare_system_error_lists_both_everyday_causes(tmp_path: Path) -> None:
    # A single-node nccl-tests run in a container: nothing but the system error itself.
    text = (
        "# nThread 1 nGpus 2 minBytes 8 maxBytes 33554432 step: 2(factor) warmup iters: 5 iters: 20\n"
        "hostB: Test NCCL failure common.cu:891 'unhandled system error'\n"
        " .. hostB pid 20117: Test failure common.cu:1002\n"
    )
    classes = class_ids(diagnose_text(tmp_path, text))
    assert classes[:2] == ["shm/dev-shm", "network/interface-selection"]


def test_shm_segment_error_outranks_the_generic_system_error(tmp_path: Path) -> None:
    text = (
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "NCCLUtils.hpp:275, unhandled system error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.21.5\n"
        "[rank0]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed "
        "or device error.\n"
        "[rank0]: Last error:\n"
        "[rank0]: Error while creating shared memory segment /dev/shm/nccl-Zq81xW (size 9637888)\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "shm/dev-shm"


def test_dataloader_worker_exit_points_at_dev_shm_unless_the_oom_killer_spoke(tmp_path: Path) -> None:
    exited = (
        "Epoch 3:  41%|████      | 812/1980 [05:11<07:27,  2.61it/s]\n"
        "RuntimeError: DataLoader worker (pid(s) 7731) exited unexpectedly\n"
    )
    assert class_ids(diagnose_text(tmp_path, exited))[0] == "shm/dev-shm"
    killed = "RuntimeError: DataLoader worker (pid 7731) is killed by signal: Killed.\n" + exited
    assert class_ids(diagnose_text(tmp_path, killed))[0] == "system/host-oom"


def test_socket_system_error_trail_in_a_container_points_at_the_interface(tmp_path: Path) -> None:
    # One host's view of a two-node job whose containers bootstrap over their bridge address.
    text = (
        "5be1c0a7d2f4:610:610 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.4<0>\n"
        "5be1c0a7d2f4:610:702 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.4<0>\n"
        "5be1c0a7d2f4:610:702 [0] NCCL INFO Using network Socket\n"
        "5be1c0a7d2f4:611:705 [1] NCCL INFO misc/socket.cc:568 -> 2\n"
        "5be1c0a7d2f4:611:705 [1] NCCL INFO bootstrap.cc:285 -> 2\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "network/interface-selection"


def test_sockets_of_different_transports_point_at_the_ib_transport(tmp_path: Path) -> None:
    text = (
        "gpu-b:21033:21190 [3] NCCL INFO NET/IB : No device found.\n"
        "gpu-b:21033:21190 [3] misc/socket.cc:570 NCCL WARN socketFinalizeAccept: wrong type 3 != 4\n"
        "[rank11]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "network/ib-rdma"


def test_a_bare_system_error_across_hosts_lists_sockets_shared_memory_and_ib(tmp_path: Path) -> None:
    text = (
        "node-a:100:100 [0] NCCL INFO Bootstrap : Using eth0:10.20.0.11<0>\n"
        "node-b:200:200 [0] NCCL INFO Bootstrap : Using eth0:10.20.0.12<0>\n"
        "RuntimeError: NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
    )
    top3 = class_ids(diagnose_text(tmp_path, text))[:3]
    assert set(top3) == {"network/interface-selection", "shm/dev-shm", "network/ib-rdma"}
    assert top3[0] == "network/interface-selection"


def test_a_bare_system_error_on_one_host_keeps_the_network_classes_below_shared_memory(
    tmp_path: Path,
) -> None:
    text = (
        "#  Rank  0 Group  0 Pid   4410 on  box device  0 [0x18] NVIDIA L40S\n"
        "#  Rank  1 Group  0 Pid   4410 on  box device  1 [0x3b] NVIDIA L40S\n"
        "box: Test NCCL failure common.cu:1008 'unhandled system error (run with NCCL_DEBUG=INFO) '\n"
    )
    ids = class_ids(diagnose_text(tmp_path, text))
    assert ids[0] == "shm/dev-shm"
    assert ids.index("network/interface-selection") < ids.index("network/ib-rdma")


def test_a_segment_nccl_cannot_find_is_no_full_dev_shm(tmp_path: Path) -> None:
    # NCCL 2.22+: the receiving side found no segment where its peer made one (ENOENT); nothing is full.
    text = (
        "n4:1833:1900 [2] misc/shmutils.cc:93 NCCL WARN Call to open failed: No such file or directory\n"
        "n4:1833:1900 [2] misc/shmutils.cc:129 NCCL WARN Error while attaching to shared memory segment "
        "/dev/shm/nccl-Xy12Ab (size 9637888), error: No such file or directory (2)\n"
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["nccl/nvls-or-algorithm", "shm/dev-shm"]
    assert d.culprit is None or "full" not in d.culprit.reason
    full = text.replace("attaching to", "creating").replace(
        "No such file or directory (2)", "No space left on device (28)"
    )
    assert class_ids(diagnose_text(tmp_path, full))[0] == "shm/dev-shm"
