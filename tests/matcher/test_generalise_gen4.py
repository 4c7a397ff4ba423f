"""Analysis-level rules that generalise beyond the dev corpus: a hang inside NVLS setup, consumer GPUs
hanging on P2P, ncclSystemError on one host, RoCE retry timeouts with an unset/differing GID index, a
docker bridge bootstrap address in a multi-host job, and the ranking of a bare watchdog timeout.
Every excerpt is written for these tests."""

from __future__ import annotations

from pathlib import Path

from matcher.model import Diagnosis
from matcher.pipeline import diagnose


def _run(tmp_path: Path, text: str, name: str = "job.log") -> Diagnosis:
    path = tmp_path / name
    path.write_text(text.lstrip("\n"), encoding="utf-8")
    return diagnose([str(path)]).diagnosis


def _classes(d: Diagnosis) -> list[str]:
    return [c.class_id for c in d.diagnoses]


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
    d = _run(tmp_path, _NVLS_TAIL)
    assert d.primary.class_id == "nccl/nvls-or-algorithm"
    assert 0.25 <= d.primary.confidence <= 0.6
    assert _classes(d)[1] == "unknown"
    assert any("NVLS Bind mem" in e.text for e in d.primary.evidence)
    assert d.culprit is None


def test_nvls_setup_that_completed_before_the_hang_is_only_a_runner_up(tmp_path: Path) -> None:
    text = _NVLS_TAIL + (
        "sxm-node-2:3301:3370 [1] NCCL INFO comm 0x61f3a0 rank 1 nranks 4 cudaDev 1 - Init COMPLETE\n"
    )
    d = _run(tmp_path, text)
    assert d.primary.class_id == "unknown"
    assert "nccl/nvls-or-algorithm" in _classes(d)[:3]


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
    d = _run(tmp_path, text)
    assert _classes(d)[:2] == ["p2p/pcie-acs", "unknown"]
    assert 0.3 <= d.primary.confidence <= 0.6


def test_one_host_of_datacenter_gpus_hanging_after_p2p_setup_keeps_unknown_first(tmp_path: Path) -> None:
    text = """
#  Rank  0 Group  0 Pid  51020 on   rig-7 device  0 [0x01] NVIDIA A100-SXM4-80GB
rig-7:51020:51020 [0] NCCL INFO Bootstrap : Using eno2:192.168.0.77<0>
rig-7:51020:51044 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[21000] via P2P/IPC
"""
    d = _run(tmp_path, text)
    assert _classes(d)[:2] == ["unknown", "p2p/pcie-acs"]


# --- 5. docker's default bridge address across hosts -----------------------------------------------------


def test_a_docker_bridge_bootstrap_address_across_hosts_points_at_the_interface(tmp_path: Path) -> None:
    text = """
ctr-a:41:41 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.3<0>
ctr-a:41:41 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.3<0>
ctr-a:41:90 [0] NCCL INFO comm 0x7a1 rank 0 nranks 16 cudaDev 0 busId 18000 - Init START
ctr-a:41:90 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
"""
    d = _run(tmp_path, text)
    assert _classes(d)[:2] == ["network/interface-selection", "unknown"]
    assert any("172.17.0.3" in e.text for e in d.primary.evidence)


def test_a_routable_bootstrap_address_in_a_multi_host_job_keeps_unknown_first(tmp_path: Path) -> None:
    text = """
ctr-a:41:41 [0] NCCL INFO Bootstrap : Using eth0:10.17.0.3<0>
ctr-a:41:90 [0] NCCL INFO comm 0x7a1 rank 0 nranks 16 cudaDev 0 busId 18000 - Init START
ctr-a:41:90 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
"""
    d = _run(tmp_path, text)
    assert _classes(d)[:2] == ["unknown", "network/interface-selection"]


def test_a_docker_bridge_address_on_a_single_host_is_no_interface_clue(tmp_path: Path) -> None:
    text = """
ctr-a:41:41 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.3<0>
ctr-a:41:90 [0] NCCL INFO Channel 00/0 : 0[18000] -> 1[19000] via P2P/IPC
"""
    d = _run(tmp_path, text)
    assert d.primary.class_id == "unknown"
    assert "network/interface-selection" not in _classes(d)[:2]
