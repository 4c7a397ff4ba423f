"""Node checks: which interface NCCL/Gloo would pick, shadowing, shm, memlock; run on this machine."""

from __future__ import annotations

import socket

from probes.checks import (
    Interface,
    check_interfaces,
    check_memlock,
    check_shm,
    gloo_choice,
    nccl_choice,
    run_checks,
)

HOST_IFACES = [
    Interface("lo", True, "127.0.0.1"),
    Interface("eth0", True, "10.77.0.1"),
    Interface("docker0", True, "172.17.0.1"),
    Interface("virbr0", True, "192.168.122.1"),
]


def names(interfaces: list[Interface]) -> list[str]:
    return [i.name for i in interfaces]


def test_nccl_socket_ifname_rules() -> None:
    assert names(nccl_choice(HOST_IFACES, {"NCCL_SOCKET_IFNAME": "eth"})) == ["eth0"]
    assert names(nccl_choice(HOST_IFACES, {"NCCL_SOCKET_IFNAME": "^docker,lo"})) == ["eth0", "virbr0"]
    assert names(nccl_choice(HOST_IFACES, {"NCCL_SOCKET_IFNAME": "=eth"})) == []
    # Unset: NCCL skips docker* and lo by itself, but not virbr*.
    assert names(nccl_choice(HOST_IFACES, {})) == ["eth0", "virbr0"]


def test_gloo_follows_its_variable_or_the_hostname() -> None:
    assert names(gloo_choice(HOST_IFACES, {"GLOO_SOCKET_IFNAME": "docker0"}, "x")) == ["docker0"]
    assert names(gloo_choice(HOST_IFACES, {}, "localhost")) == ["lo"]


def test_forcing_docker0_across_hosts_is_interface_shadowing() -> None:
    check = check_interfaces({"GLOO_SOCKET_IFNAME": "docker0"}, multi_host=True, interfaces=HOST_IFACES)
    assert check.status == "fail"
    assert "interface shadowing: GLOO_SOCKET_IFNAME=docker0 selects docker0" in check.evidence


def test_an_interface_name_that_matches_nothing_fails() -> None:
    check = check_interfaces({"NCCL_SOCKET_IFNAME": "ens3"}, multi_host=False, interfaces=HOST_IFACES)
    assert check.status == "fail"
    assert "NCCL_SOCKET_IFNAME=ens3 matches no interface" in check.evidence


def test_virbr_without_nccl_socket_ifname_warns() -> None:
    check = check_interfaces({"GLOO_SOCKET_IFNAME": "eth0"}, multi_host=True, interfaces=HOST_IFACES)
    assert check.status == "warn" and "virbr0" in check.evidence


def test_single_host_on_loopback_is_fine() -> None:
    check = check_interfaces({}, multi_host=False, interfaces=[Interface("lo", True, "127.0.0.1")])
    assert check.status == "pass"


def test_shm_and_memlock_report_their_numbers() -> None:
    shm = check_shm()
    assert shm.status in {"pass", "warn", "fail"} and "MiB" in shm.evidence
    assert check_shm("/no/such/dir").status == "skipped"
    assert "ulimit -l" in check_memlock(rdma_present=False).evidence


def test_every_check_runs_here_and_absent_tools_are_skipped_not_passed() -> None:
    checks = run_checks(env={}, multi_host=False, versions={"torch": "x"})
    assert all(c.host == socket.gethostname() for c in checks)
    by_name = {c.name: c for c in checks}
    assert len(by_name) == 10
    for name in ("gpus", "topology", "fabric-manager"):
        if "not installed" in by_name[name].evidence:
            assert by_name[name].status == "skipped"
    assert by_name["versions"].evidence.startswith("torch x")
