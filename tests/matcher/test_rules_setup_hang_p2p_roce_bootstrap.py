"""Analysis-level rules that generalise beyond the dev corpus: a hang inside NVLS setup, consumer GPUs
hanging on P2P, ncclSystemError on one host, RoCE retry timeouts with an unset/differing GID index, a
docker bridge bootstrap address in a multi-host job, and the ranking of a bare watchdog timeout.
Every excerpt is written for these tests."""

from __future__ import annotations

from pathlib import Path

from tests.matcher.excerpts import class_ids, diagnose_text

# --- 1. hang inside NVLS setup ----------------------------------------------------------------------------

_NVLS_TAIL = """
sxm-node-2:3301:3301 [1] NCCL INFO Bootstrap : Using bond0:10.60.2.2<0>
sxm-node-2:3301:3301 [1] NCCL INFO NCCL version 2.20.5+cuda12.4
sxm-node-2:3301:3370 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/CUMEM/read
sxm-node-2:3301:3370 [1] NCCL INFO Connected all rings
sxm-node-2:3301:3370 [1] NCCL INFO NVLS comm 0x61f3a0 headRank 1 nHeads 4 buffSize 1048576 memSize 2097152
sxm-node-2:3301:3370 [1] NCCL INFO NVLS Bind mem 0xb20000000 UC handle 0x7f55e80a1c30 MC handle 0x7f55e80a0a10
"""


def test_a_log_that_stops_in_nvls_setup_points_at_nvls_first(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _NVLS_TAIL)
    assert d.primary.class_id == "nccl/nvls-or-algorithm"
    assert 0.25 <= d.primary.confidence <= 0.6
    assert "unknown" in class_ids(d)
    assert any("NVLS Bind mem" in e.text for e in d.primary.evidence)
    assert d.culprit is None


def test_nvls_setup_that_completed_before_the_hang_is_only_a_runner_up(tmp_path: Path) -> None:
    text = _NVLS_TAIL + (
        "sxm-node-2:3301:3370 [1] NCCL INFO comm 0x61f3a0 rank 1 nranks 4 cudaDev 1 - Init COMPLETE\n"
    )
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id != "nccl/nvls-or-algorithm"
    assert "nccl/nvls-or-algorithm" in class_ids(d)[:3]


# --- 2. consumer GPUs on one host hanging after P2P setup ------------------------------------------------


def test_one_host_of_geforce_gpus_hanging_after_p2p_setup_points_at_p2p(tmp_path: Path) -> None:
    text = """
#  Rank  0 Group  0 Pid  51020 on   rig-7 device  0 [0x01] NVIDIA GeForce RTX 3090
#  Rank  1 Group  0 Pid  51020 on   rig-7 device  1 [0x21] NVIDIA GeForce RTX 3090
rig-7:51020:51020 [0] NCCL INFO Bootstrap : Using eno2:192.168.0.77<0>
rig-7:51020:51044 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[21000] via P2P/IPC
rig-7:51020:51045 [1] NCCL INFO Channel 00/0 : 1[21000] -> 0[1000] via P2P/IPC
rig-7:51020:51044 [0] NCCL INFO Connected all rings
"""
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["p2p/pcie-acs", "unknown"]
    assert 0.3 <= d.primary.confidence <= 0.6


def test_one_host_of_datacenter_gpus_hanging_after_p2p_setup_guesses_p2p_weakly(tmp_path: Path) -> None:
    text = """
#  Rank  0 Group  0 Pid  51020 on   rig-7 device  0 [0x01] NVIDIA A100-SXM4-80GB
rig-7:51020:51020 [0] NCCL INFO Bootstrap : Using eno2:192.168.0.77<0>
rig-7:51020:51044 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[21000] via P2P/IPC
"""
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["p2p/pcie-acs", "unknown"]
    assert d.primary.confidence <= 0.45  # a guess, not a finding: no GeForce board says it


# --- 5. docker's default bridge address across hosts -----------------------------------------------------


def test_a_docker_bridge_bootstrap_address_across_hosts_points_at_the_interface(tmp_path: Path) -> None:
    text = """
ctr-a:41:41 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.3<0>
ctr-a:41:41 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.3<0>
ctr-a:41:90 [0] NCCL INFO comm 0x7a1 rank 0 nranks 16 cudaDev 0 busId 18000 - Init START
ctr-a:41:90 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
"""
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["network/interface-selection", "unknown"]
    assert any("172.17.0.3" in e.text for e in d.primary.evidence)


def test_a_routable_bootstrap_address_in_a_multi_host_job_is_only_a_weak_guess(tmp_path: Path) -> None:
    text = """
ctr-a:41:41 [0] NCCL INFO Bootstrap : Using eth0:10.17.0.3<0>
ctr-a:41:90 [0] NCCL INFO comm 0x7a1 rank 0 nranks 16 cudaDev 0 busId 18000 - Init START
ctr-a:41:90 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
"""
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "network/interface-selection"
    assert d.primary.confidence <= 0.45


def test_a_docker_bridge_address_on_a_single_host_is_no_interface_clue(tmp_path: Path) -> None:
    text = """
ctr-a:41:41 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.3<0>
ctr-a:41:90 [0] NCCL INFO Channel 00/0 : 0[18000] -> 1[19000] via P2P/IPC
"""
    d = diagnose_text(tmp_path, text)
    assert "network/interface-selection" not in class_ids(d)[:2]


# --- 3. ncclSystemError on one host ---------------------------------------------------------------------


def test_a_system_error_in_a_one_host_nccl_tests_run_points_at_dev_shm(tmp_path: Path) -> None:
    text = """
# Using devices
#  Rank  0 Group  0 Pid   4410 on  9f8e7d6c5b4a device  0 [0x18] NVIDIA L40S
#  Rank  1 Group  0 Pid   4410 on  9f8e7d6c5b4a device  1 [0x3b] NVIDIA L40S
9f8e7d6c5b4a: Test NCCL failure common.cu:1008 'unhandled system error (run with NCCL_DEBUG=INFO) '
"""
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["shm/dev-shm", "network/interface-selection"]


def test_a_system_error_after_shm_channels_on_one_host_points_at_dev_shm(tmp_path: Path) -> None:
    text = """
pod-x:900:900 [0] NCCL INFO Bootstrap : Using eth0:10.88.4.20<0>
pod-x:900:950 [0] NCCL INFO Channel 00 : 0[18000] -> 1[3b000] via SHM/direct/direct
pod-x:901:951 [1] NCCL INFO Channel 00 : 1[3b000] -> 0[18000] via SHM/direct/direct
[rank0]: DistBackendError: NCCL error in: x.hpp:275, unhandled system error, NCCL version 2.20.5
"""
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["shm/dev-shm", "network/interface-selection"]


def test_a_system_error_on_consumer_gpus_still_prefers_the_errors_own_suspects(tmp_path: Path) -> None:
    text = """
#  Rank  0 Pid  7001 on  deskside device  0 [0x01] NVIDIA GeForce RTX 4080
#  Rank  1 Pid  7001 on  deskside device  1 [0x02] NVIDIA GeForce RTX 4080
deskside: Test NCCL failure common.cu:777 'unhandled system error'
"""
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "shm/dev-shm"
    assert "p2p/pcie-acs" in class_ids(d)


def test_a_system_error_across_hosts_keeps_the_socket_reading_first(tmp_path: Path) -> None:
    text = """
node-a:900:900 [0] NCCL INFO Bootstrap : Using eth0:10.88.4.20<0>
node-a:900:950 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
node-b:311:360 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0
[rank0]: DistBackendError: NCCL error in: x.hpp:275, unhandled system error, NCCL version 2.20.5
"""
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["network/interface-selection", "shm/dev-shm"]


def test_a_bare_system_error_without_hosts_lists_dev_shm_before_the_socket(tmp_path: Path) -> None:
    # Nothing says the job spans hosts: the container's /dev/shm resolved more such pastes than the socket.
    text = "RuntimeError: NCCL error in: pg.cpp:1269, unhandled system error, NCCL version 2.14.3\n"
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["shm/dev-shm", "network/interface-selection"]


# --- 4. RoCE retry timeout right after init ---------------------------------------------------------------

_ROCE = """
gpu-e1:6120:6120 [2] NCCL INFO NET/IB : Using [0]mlx5_4:1/RoCE [1]mlx5_5:1/RoCE [RO]; OOB bond1:10.31.0.21<0>
gpu-e1:6120:6188 [2] NCCL INFO Channel 00/0 : 2[2] -> 10[2] [send] via NET/IB/0
gpu-e1:6120:6199 [2] transport/net_ib.cc:1036 NCCL WARN NET/IB : Got completion from peer 10.31.0.22<40113> \
with error 12, opcode 0, len 0, vendor err 129
gpu-e1:6120:6199 [2] NCCL INFO transport/net.cc:1141 -> 6
"""


def test_a_retry_timeout_at_start_on_roce_without_a_gid_index_points_at_the_gid(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _ROCE)
    assert class_ids(d)[:2] == ["network/roce-gid", "network/ib-rdma"]


def test_gid_indexes_that_differ_across_hosts_point_at_the_gid(tmp_path: Path) -> None:
    text = (
        "gpu-e1:6120:6120 [2] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n"
        "gpu-e2:7001:7001 [2] NCCL INFO NCCL_IB_GID_INDEX set by environment to 1.\n" + _ROCE.lstrip("\n")
    )
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "network/roce-gid"


def test_a_gid_index_set_on_every_host_leaves_the_ib_transport_first(tmp_path: Path) -> None:
    text = "gpu-e1:6120:6120 [2] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n" + _ROCE.lstrip("\n")
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "network/ib-rdma"


def test_the_same_retry_timeout_on_infiniband_leaves_the_ib_transport_first(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _ROCE.replace("/RoCE", "/IB"))
    assert d.primary.class_id == "network/ib-rdma"


# --- 6. a lone watchdog timeout ----------------------------------------------------------------------------


def _watchdog(rank: int, seq: int, op: str, numel: int, timeout_ms: int) -> str:
    return (
        f"[rank{rank}]:[E1102 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
        f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, "
        f"NumelOut={numel}, Timeout(ms)={timeout_ms}) ran for {timeout_ms + 211} milliseconds "
        "before timing out.\n"
    )


def test_a_lone_mid_run_timeout_keeps_unknown_first_and_ranks_the_usual_causes(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _watchdog(2, 31877, "ALLREDUCE", 2097152, 1800000))
    assert class_ids(d)[:4] == [
        "unknown",
        "timeout/asymmetric-collectives",
        "timeout/rank0-only-work",
        "timeout/straggler-input",
    ]


def test_a_lone_timeout_reported_by_rank0_itself_does_not_suspect_rank0_work(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _watchdog(0, 31877, "ALLREDUCE", 2097152, 1800000))
    classes = class_ids(d)
    assert classes[:2] == ["unknown", "timeout/asymmetric-collectives"]
    assert classes.index("timeout/straggler-input") < classes.index("timeout/rank0-only-work")


def test_a_lone_short_timeout_does_not_suspect_rank0_work_first(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _watchdog(3, 9120, "ALLGATHER", 4096, 120000))
    classes = class_ids(d)
    assert classes[0] == "unknown"
    assert classes.index("timeout/straggler-input") < classes.index("timeout/rank0-only-work")


def test_geforce_ranks_all_listed_on_one_host_hanging_at_init_point_at_p2p(tmp_path: Path) -> None:
    text = """
# Using devices
#  Rank  0 Group  0 Pid  3110 on gpubox-12 device  0 [0000:41:00] NVIDIA GeForce RTX 4090
#  Rank  1 Group  0 Pid  3110 on gpubox-12 device  1 [0000:42:00] NVIDIA GeForce RTX 4090
gpubox-12:3110:3110 [0] NCCL INFO Bootstrap: Using enp3s0:10.9.8.12<0>
gpubox-12:3110:3110 [0] NCCL INFO NCCL version 2.23.4+cuda12.6
gpubox-12:3110:3170 [1] NCCL INFO ncclCommInitAll comm 0x55e1 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 42000
"""
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["p2p/pcie-acs", "unknown"]


def test_a_pod_network_address_elsewhere_in_172_17_is_not_the_docker_bridge(tmp_path: Path) -> None:
    text = """
ctr-a:41:41 [0] NCCL INFO Bootstrap : Using eth0:172.17.96.14<0>
ctr-a:41:90 [0] NCCL INFO comm 0x7a1 rank 0 nranks 16 cudaDev 0 busId 18000 - Init START
ctr-a:41:90 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
"""
    pod = diagnose_text(tmp_path, text, name="pod.log")
    bridge = diagnose_text(tmp_path, text.replace("172.17.96.14", "172.17.0.3"), name="bridge.log")
    assert pod.primary.class_id == bridge.primary.class_id == "network/interface-selection"
    # Only the docker bridge address is a finding; the pod network address leaves a plain guess.
    assert pod.primary.confidence < bridge.primary.confidence


def test_one_process_stuck_in_nvls_setup_leads_even_when_others_completed_init(tmp_path: Path) -> None:
    text = """
sxm-node-2:3301:3370 [1] NCCL INFO NVLS comm 0x61f3a0 headRank 1 nHeads 4 buffSize 1048576 memSize 2097152
sxm-node-2:3302:3371 [2] NCCL INFO NVLS comm 0x61f3b0 headRank 2 nHeads 4 buffSize 1048576 memSize 2097152
sxm-node-2:3301:3370 [1] NCCL INFO NVLS Bind mem 0xb20000000 UC handle 0x7f55e80a1c30 MC handle 0x7f55e80a0a10
sxm-node-2:3302:3371 [2] NCCL INFO NVLS Bind mem 0xb40000000 UC handle 0x7f55e80b1c30 MC handle 0x7f55e80b0a10
sxm-node-2:3302:3371 [2] NCCL INFO comm 0x61f3b0 rank 2 nranks 4 cudaDev 2 - Init COMPLETE
"""
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "nccl/nvls-or-algorithm"
