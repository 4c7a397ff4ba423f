"""Pastes shaped like the ones users post when they search by symptom, not by cause.

Every excerpt here is written for the test (hosts, pids, addresses, sizes and versions are invented) and
follows the form of public threads found by searching for symptoms ("unhandled system error", "Watchdog
caught collective operation timeout", "Connection reset by peer"...). The whole matcher runs on them, so the
tests check what the product answers: the class order and, above all, that no culprit is invented from text
that does not name a machine (a redacted address, a fragment of an IPv6-mapped address).
"""

from __future__ import annotations

from pathlib import Path

from matcher.model import Diagnosis
from matcher.pipeline import diagnose


def _diagnose(tmp_path: Path, text: str) -> Diagnosis:
    path = tmp_path / "paste.log"
    path.write_text(text)
    return diagnose([str(path)]).diagnosis


def _classes(diagnosis: Diagnosis) -> list[str]:
    return [score.class_id for score in diagnosis.diagnoses]


def _culprit_hosts(diagnosis: Diagnosis) -> tuple[str, ...]:
    return tuple(diagnosis.culprit.hosts) if diagnosis.culprit else ()


def test_redacted_peer_address_is_never_named_as_culprit(tmp_path: Path) -> None:
    # Users mask addresses before pasting; the masked token is not a machine.
    text = (
        "torch.distributed.DistBackendError: NCCL error in: /opt/torch/csrc/distributed/c10d/"
        "NCCLUtils.hpp:271, remote process exited or there was a network error, NCCL version 2.21.5\n"
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.\n"
        "Last error:\n"
        "socketProgressOpt: Call to recv from 10.8....<40112> failed : Connection reset by peer\n"
    )
    diagnosis = _diagnose(tmp_path, text)
    assert _classes(diagnosis)[0] == "network/peer-exit"
    assert not any("...." in host for host in _culprit_hosts(diagnosis))


def test_masked_peer_with_x_placeholders_names_no_host(tmp_path: Path) -> None:
    text = (
        "trainer-2:811:902 [3] misc/socket.cc:47 NCCL WARN socketProgress: Connection closed by remote peer "
        "xxx.xxx.xxx.xxx<51877>\n"
        "trainer-2:811:902 [3] NCCL INFO misc/socket.cc:752 -> 6\n"
    )
    diagnosis = _diagnose(tmp_path, text)
    assert "network/peer-exit" in _classes(diagnosis)
    assert "xxx.xxx.xxx.xxx" not in _culprit_hosts(diagnosis)


def test_real_peer_address_is_still_the_culprit(tmp_path: Path) -> None:
    text = (
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.\n"
        "socketProgressOpt: Call to recv from 10.8.14.3<40112> failed : Connection reset by peer\n"
    )
    assert _culprit_hosts(_diagnose(tmp_path, text)) == ("10.8.14.3",)


def test_ipv6_mapped_master_address_is_read_whole(tmp_path: Path) -> None:
    # A MASTER_ADDR that is really a netmask: the store address is the fault, and it must be named whole,
    # not as the "::ffff" prefix of the mapped form.
    text = (
        "[W1129 04:10:02.118000000 socket.cpp:752] [c10d] The client socket has failed to connect to "
        "[::ffff:255.255.255.0]:29511 (errno: 110 - Connection timed out).\n"
    )
    diagnosis = _diagnose(tmp_path, text)
    assert _classes(diagnosis)[0] == "rendezvous/store"
    assert _culprit_hosts(diagnosis) == ("255.255.255.0",)


def test_cuda_failure_in_nvls_transport_keeps_fabric_manager_on_the_list(tmp_path: Path) -> None:
    # NVLS setup failing with a CUDA error on an HGX box: NVLS comes first, but a fabric manager restarted
    # while GPU memory was held produces the same lines, so it must stay in the top three.
    text = (
        "NCCL version 2.18.3+cuda12.2\n"
        "hgx-c11:20417:20488 [6] transport/nvls.cc:158 NCCL WARN Cuda failure 'invalid argument'\n"
        "hgx-c11:20417:20488 [6] NCCL INFO transport/nvls.cc:330 -> 1\n"
        "hgx-c11:20417:20488 [6] NCCL INFO init.cc:1106 -> 1\n"
    )
    classes = _classes(_diagnose(tmp_path, text))
    assert classes[0] == "nccl/nvls-or-algorithm"
    assert "system/fabric-manager" in classes[:3]


def test_plain_watchdog_timeouts_claim_no_cause(tmp_path: Path) -> None:
    # Same SeqNum everywhere, every rank one step ahead in what it enqueued: nothing says why.
    text = "".join(
        f"[rank{r}]:[E0612 11:02:4{r}.0000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=4411, OpType=ALLREDUCE, NumelIn=2359296, NumelOut=2359296, "
        "Timeout(ms)=600000) ran for 600047 milliseconds before timing out.\n"
        f"[rank{r}]:[E0612 11:02:4{r}.0001 ProcessGroupNCCL.cpp:2168] "
        f"[PG ID 0 PG GUID 0(default_pg) Rank {r}] failure detected by watchdog at work sequence id: "
        "4411 PG status: last enqueued work: 4413, "
        "last completed work: 4410\n"
        for r in range(4)
    )
    diagnosis = _diagnose(tmp_path, text)
    assert _classes(diagnosis)[0] == "unknown"
    assert not diagnosis.culprit or not diagnosis.culprit.ranks
