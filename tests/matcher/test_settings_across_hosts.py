"""NCCL settings and network plugins that differ between the hosts of one job point at their own class."""

from __future__ import annotations

from pathlib import Path

from tests.matcher.excerpts import class_ids, diagnose_text

TIMEOUT = (
    "[rank{r}]:[E1129 03:11:40.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
    "ran for 600083 milliseconds before timing out.\n"
)


def test_a_gid_index_set_differently_on_two_hosts_points_at_the_gid(tmp_path: Path) -> None:
    text = (
        "node-a:4100:4100 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n"
        "node-b:4200:4200 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 1.\n" + TIMEOUT.format(r=1)
    )
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "network/roce-gid"
    texts = " ".join(e.text for e in d.primary.evidence)
    assert "to 3" in texts and "to 1" in texts


def test_hosts_that_loaded_different_network_plugins_point_at_the_plugin(tmp_path: Path) -> None:
    text = (
        "node-a:4100:4100 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v8)\n"
        "node-b:4200:4200 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal plugin.\n"
        + TIMEOUT.format(r=1)
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "network/efa-ofi"


def test_ib_on_one_host_and_sockets_on_another_points_at_the_ib_transport(tmp_path: Path) -> None:
    text = (
        "node-a:4100:4100 [0] NCCL INFO Using network IB\n"
        "node-b:4200:4200 [0] NCCL INFO Using network Socket\n" + TIMEOUT.format(r=1)
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "network/ib-rdma"


def test_an_unlisted_setting_that_differs_is_a_configuration_mismatch(tmp_path: Path) -> None:
    text = (
        "node-a:4100:4100 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 8388608.\n"
        "node-b:4200:4200 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 4194304.\n" + TIMEOUT.format(r=1)
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "config/version-mismatch"


def test_the_same_setting_on_every_host_is_no_evidence(tmp_path: Path) -> None:
    text = (
        "node-a:4100:4100 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n"
        "node-b:4200:4200 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n" + TIMEOUT.format(r=1)
    )
    assert "network/roce-gid" not in class_ids(diagnose_text(tmp_path, text))[:1]


def test_two_values_from_one_host_are_two_runs_not_a_split(tmp_path: Path) -> None:
    text = (
        "node-a:4100:4100 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
        "node-a:4300:4300 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0\n"
        "node-b:4200:4200 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n" + TIMEOUT.format(r=1)
    )
    assert "network/interface-selection" not in class_ids(diagnose_text(tmp_path, text))[:1]
