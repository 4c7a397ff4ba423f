"""End-to-end rules (log text -> pipeline -> Diagnosis) for the cases a plain root/cascade split misses:
a hang right after NCCL init, NCCL's own illegal-access report, one host's ranks failing together,
NCCL WARN lines tied to ranks through their pid, and versions that differ across hosts."""

from __future__ import annotations

from pathlib import Path

from matcher.analysis.rankmap import build_rank_map
from matcher.analysis.versions import differing_versions
from matcher.model import Line, Observation
from tests.matcher.excerpts import class_ids, diagnose_text


def _setup(host: str, pid: int, rank: int, iface: str, ip: str, transports: list[tuple[int, str]]) -> str:
    lines = [
        f"{host}:{pid}:{pid} [{rank % 8}] NCCL INFO Bootstrap : Using {iface}:{ip}<0>",
        f"{host}:{pid}:{pid} [{rank % 8}] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so)",
    ]
    for channel, (peer, transport) in enumerate(transports):
        lines.append(
            f"{host}:{pid}:{pid + 91} [{rank % 8}] NCCL INFO Channel {channel:02d}/0 : "
            f"{rank}[{rank % 8}] -> {peer}[{peer % 8}] via {transport}"
        )
    return "\n".join(lines) + "\n"


# --- 1. hang right after NCCL init, no error line -------------------------------------------------------


def test_single_host_hang_after_init_suggests_peer_to_peer_first(tmp_path: Path) -> None:
    text = "".join(
        _setup("dgx-box", 5100 + r, r, "enp65s0", "10.3.0.8", [((r + 1) % 4, "P2P/IPC/read")])
        for r in range(4)
    )
    d = diagnose_text(tmp_path, text)
    # A guess leads (hangs like this were P2P in resolved threads), at a guess's confidence, no culprit.
    assert class_ids(d)[:2] == ["p2p/pcie-acs", "unknown"]
    assert d.primary.confidence <= 0.45
    assert all(c.confidence < d.primary.confidence for c in d.diagnoses[1:])
    assert d.culprit is None
    assert "hung right after NCCL initialisation" in (d.no_culprit_reason or "")
    assert any("P2P/IPC" in e.text for e in d.primary.evidence)


def test_consumer_gpus_raise_peer_to_peer_even_across_hosts(tmp_path: Path) -> None:
    text = (
        "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-0a1b2c3d-1111-2222-3333-444455556666)\n"
        + _setup("ws-a", 700, 0, "eno1", "192.168.1.10", [(1, "NET/Socket/0")])
        + _setup("ws-b", 800, 1, "eno1", "192.168.1.11", [(0, "NET/Socket/0")])
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "network/interface-selection"
    assert "p2p/pcie-acs" in class_ids(d)[:3]


def test_multi_host_socket_hang_suggests_interface_then_versions(tmp_path: Path) -> None:
    text = (
        "NCCL version 2.21.5+cuda12.4\n"
        + _setup("node-a", 4100, 0, "ens5", "10.0.1.4", [(1, "NET/Socket/0")])
        + _setup("node-b", 4200, 1, "ens5", "10.0.1.5", [(0, "NET/Socket/0")])
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:3] == ["network/interface-selection", "config/version-mismatch", "unknown"]
    assert d.culprit is None


def test_an_old_nccl_release_puts_versions_before_the_interface(tmp_path: Path) -> None:
    text = (
        "node-a:4100:4100 [0] NCCL INFO NCCL version 2.8.4+cuda11.1\n"
        + _setup("node-a", 4100, 0, "ens5", "10.0.1.4", [])
        + _setup("node-b", 4200, 1, "ens5", "10.0.1.5", [])
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["config/version-mismatch", "network/interface-selection"]
    assert any("2.8.4" in e.text for e in d.primary.evidence)
    assert "2.8.4" in (d.no_culprit_reason or "")


def test_one_hosts_lines_of_a_job_larger_than_a_host_are_treated_as_multi_node(tmp_path: Path) -> None:
    text = _setup("node-a", 4100, 0, "ens5", "10.0.1.4", []) + (
        "node-a:4100:4190 [0] NCCL INFO comm 0x5a10 rank 0 nranks 32 cudaDev 0 busId 18000 - Init COMPLETE\n"
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "network/interface-selection"
    assert "unknown" in class_ids(d)


def test_gpudirect_rdma_paths_suggest_driver_stack_and_ib(tmp_path: Path) -> None:
    text = _setup("hpc-17", 9000, 4, "ib0", "172.20.0.17", [(12, "NET/IB/0/GDRDMA"), (13, "NET/IB/1/GDRDMA")])
    d = diagnose_text(tmp_path, text)
    assert set(class_ids(d)[:2]) == {"config/version-mismatch", "network/ib-rdma"}
    assert d.primary.confidence <= 0.45


def test_setup_lines_followed_by_a_timeout_are_not_a_silent_hang(tmp_path: Path) -> None:
    text = _setup("node-a", 4100, 0, "ens5", "10.0.1.4", [(1, "NET/Socket/0")]) + (
        "[rank0]:[E1129 03:10:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
        "Timeout(ms)=600000) ran for 600021 milliseconds before timing out.\n"
    )
    d = diagnose_text(tmp_path, text)
    assert "hung right after NCCL initialisation" not in (d.no_culprit_reason or "")
    assert d.symptom == "collective-timeout"


# --- 2. NCCL's own CUDA check reports the illegal access first ------------------------------------------


_NCCL_IMA = (
    "[2025-03-02 10:15:07] gpu-ws:6101:6101 [1] enqueue.cc:1600 NCCL WARN Cuda failure 700 "
    "'an illegal memory access was encountered'\n"
    "gpu-ws:6101:6101 [1] NCCL INFO group.cc:240 -> 1\n"
)
_FRAMEWORK_IMA = (
    "terminate called after throwing an instance of 'c10::Error'\n"
    "  what():  CUDA error: an illegal memory access was encountered\n"
)


def test_illegal_access_caught_first_by_nccl_points_at_nccl(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _NCCL_IMA + _FRAMEWORK_IMA)
    assert class_ids(d)[:2] == ["nccl/nvls-or-algorithm", "cuda/illegal-access"]
    assert d.facts.get("error_code") == 700


def test_a_device_side_assert_before_nccl_keeps_the_application_at_fault(tmp_path: Path) -> None:
    assert_line = (
        "/opt/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [3,0,0], "
        "thread: [17,0,0] Assertion `-sizes[i] <= index && "
        'index < sizes[i] && "index out of bounds"` failed.\n'
    )
    d = diagnose_text(tmp_path, assert_line + _NCCL_IMA + _FRAMEWORK_IMA)
    assert d.primary.class_id == "cuda/illegal-access"


# --- 3. every failing rank on one host -------------------------------------------------------------------


def test_ranks_failing_together_on_one_host_name_that_host(tmp_path: Path) -> None:
    lines = []
    for rank, pid in ((8, 3301), (9, 3302), (10, 3303)):
        lines.append(
            f"2026-01-12T08:00:01.{rank:03d}Z: [1,{rank}]<stdout>:ib-node-02:{pid}:{pid + 40} [0] "
            "transport/net_ib.cc:90 NCCL WARN NET/IB : Got async event : local catastrophic error"
        )
    d = diagnose_text(tmp_path, "\n".join(lines) + "\n")
    assert d.primary.class_id == "network/ib-rdma"
    assert d.culprit is not None
    assert d.culprit.hosts == ("ib-node-02",) and d.culprit.ranks == ()
    assert "local to that host" in d.culprit.reason


def test_every_rank_of_a_single_node_job_failing_together_names_nobody(tmp_path: Path) -> None:
    lines = [
        f"2026-01-12T08:00:01.{rank:03d}Z: [1,{rank}]<stdout>:solo:{4400 + rank}:{4500 + rank} [{rank}] "
        "transport/net_ib.cc:90 NCCL WARN NET/IB : Got async event : local catastrophic error"
        for rank in range(4)
    ]
    d = diagnose_text(tmp_path, "\n".join(lines) + "\n")
    assert d.culprit is None


# --- 4. a NCCL WARN gets its rank from the channel lines of the same pid ----------------------------------


def test_nccl_warn_is_tied_to_its_rank_through_the_pid(tmp_path: Path) -> None:
    text = "".join(
        _setup("train-07", 2200 + r, r, "eth0", "10.8.0.7", [((r + 1) % 4, "SHM/direct/direct")])
        for r in range(4)
    ) + ("train-07:2202:2202 [2] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'\n")
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "cuda/oom"
    assert d.culprit is not None and d.culprit.ranks == (2,)
    assert d.culprit.hosts == ("train-07",)


# --- 5. versions that differ across hosts ----------------------------------------------------------------


def _version_job(version_b: str) -> str:
    return (
        "node-a:4100:4100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        f"node-b:4200:4200 [0] NCCL INFO NCCL version {version_b}\n"
        "[rank1]:[E1129 03:10:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600021 milliseconds before timing out.\n"
    )


def test_different_nccl_releases_across_hosts_are_version_mismatch_evidence(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _version_job("2.18.1+cuda12.1"))
    assert d.primary.class_id == "config/version-mismatch"
    texts = " ".join(e.text for e in d.primary.evidence)
    assert "2.21.5" in texts and "2.18.1" in texts


def test_the_same_release_on_every_host_is_no_evidence(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _version_job("2.21.5+cuda12.4"))
    assert "config/version-mismatch" not in class_ids(d)


def test_every_rank_echoing_nccls_illegal_access_does_not_outvote_it(tmp_path: Path) -> None:
    echoes = "".join(
        f"[rank{r}]: RuntimeError: CUDA error: an illegal memory access was encountered\n" for r in range(4)
    )
    d = diagnose_text(tmp_path, _NCCL_IMA + echoes)
    assert class_ids(d)[:2] == ["nccl/nvls-or-algorithm", "cuda/illegal-access"]


# --- 6. time since the last progress line ------------------------------------------------------------------


def _iteration(clock: str, step: int) -> str:
    return (
        f"[2025-06-01 {clock}] iteration {step:>8}/  500000 | consumed samples: {step * 256:>12} | "
        "elapsed time per iteration (ms): 1432.5 | learning rate: 3.000E-04 | lm loss: 6.520E+00 |\n"
    )


_IB_FAILURE = (
    "[2025-06-01 10:11:00] node-a:5101:5170 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion "
    "from peer 10.0.1.5<52341> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.1.4\n"
)


def test_since_progress_is_the_gap_between_the_last_step_and_the_failure(tmp_path: Path) -> None:
    text = _iteration("10:00:00", 100) + _iteration("10:00:30", 110) + _iteration("10:01:00", 120)
    d = diagnose_text(tmp_path, text + _IB_FAILURE)
    assert d.primary.class_id == "network/ib-rdma"
    assert d.facts["since_progress_ms"] == 600_000


def test_progress_after_the_only_error_line_leaves_since_progress_unknown(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _IB_FAILURE + _iteration("10:12:00", 130))
    assert "since_progress_ms" not in d.facts


def test_more_progress_lines_than_the_scanner_keeps_leave_since_progress_unknown(tmp_path: Path) -> None:
    steps = "".join(_iteration(f"10:0{m // 6}:{(m % 6) * 10:02d}", 100 + m) for m in range(20))
    d = diagnose_text(tmp_path, steps + _IB_FAILURE)
    assert "since_progress_ms" not in d.facts


_OOM_WARN = "train-07:2202:2202 [2] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'\n"


def test_a_process_in_several_communicators_gets_the_rank_of_the_largest(tmp_path: Path) -> None:
    text = (
        "train-07:2202:2290 [2] NCCL INFO comm 0x7f10 rank 1 nranks 2 cudaDev 2 busId 41000 - Init COMPLETE\n"
        "train-07:2202:2290 [2] NCCL INFO comm 0x7f20 rank 10 nranks 16 cudaDev 2 busId 41000 - "
        "Init COMPLETE\n"
        "train-07:2202:2290 [2] NCCL INFO Channel 00/0 : 1[2] -> 0[1] via P2P/IPC/read\n"
    )
    d = diagnose_text(tmp_path, text + _OOM_WARN)
    assert d.culprit is not None and d.culprit.ranks == (10,)


def test_channel_lines_of_several_communicators_alone_map_no_rank(tmp_path: Path) -> None:
    text = (
        "train-07:2202:2290 [2] NCCL INFO Channel 00/0 : 1[2] -> 0[1] via P2P/IPC/read\n"
        "train-07:2202:2291 [2] NCCL INFO Channel 00/0 : 5[2] -> 13[2] [send] via NET/IB/0/GDRDMA\n"
    )
    d = diagnose_text(tmp_path, text + _OOM_WARN)
    assert d.culprit is not None
    assert d.culprit.ranks == () and d.culprit.hosts == ("train-07",)


# --- the rendezvous host the ranks could not reach ---------------------------------------------------------


def test_ranks_that_cannot_reach_the_store_name_the_store_host(tmp_path: Path) -> None:
    text = "".join(
        f"[rank{r}]: torch.distributed.DistStoreError: The client socket has timed out after 900000ms while "
        f"trying to connect to (trainer-master-0, 29500).\n"
        for r in (1, 2, 3)
    )
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "rendezvous/store"
    assert d.culprit is not None
    assert d.culprit.hosts == ("trainer-master-0",) and d.culprit.ranks == ()


def test_an_unset_master_address_names_no_host(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, "nslookup: can't resolve '(null)': Name does not resolve\n")
    assert d.primary.class_id == "rendezvous/store"
    assert d.culprit is None


# --- output pasted under a shell prompt belongs to the prompt's host ----------------------------------------


_XID = "[Tue Mar  4 02:11:09 2025] NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus.\n"


def test_kernel_lines_pasted_under_a_prompt_belong_to_its_host(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, "root@gpu-node-31:~# dmesg -T | grep -i xid\n" + _XID)
    assert d.primary.class_id == "hardware/gpu-xid"
    assert d.culprit is not None and d.culprit.hosts == ("gpu-node-31",)


def test_lines_above_the_prompt_or_far_below_it_are_not_its_hosts(tmp_path: Path) -> None:
    filler = "".join(f"    {i} | some unrelated pasted text\n" for i in range(250))
    d = diagnose_text(tmp_path, _XID + "root@gpu-node-31:~# dmesg -T | grep -i xid\n" + filler + _XID)
    assert d.culprit is None


def test_a_receive_channel_line_names_the_writer_second(tmp_path: Path) -> None:
    text = "train-07:2202:2290 [2] NCCL INFO Channel 01/1 : 9[2] -> 2[2] [receive] via NET/IB/1/GDRDMA\n"
    d = diagnose_text(tmp_path, text + _OOM_WARN)
    assert d.culprit is not None and d.culprit.ranks == (2,)


def test_training_progress_after_the_setup_lines_is_no_hang_at_init(tmp_path: Path) -> None:
    text = _setup("node-a", 4100, 0, "ens5", "10.0.1.4", [(1, "P2P/IPC/read")]) + _iteration("10:00:00", 10)
    d = diagnose_text(tmp_path, text)
    assert class_ids(d) == ["unknown"]
    assert "NCCL initialisation" not in (d.no_culprit_reason or "")


def _version_line(host: str | None, version: str, signature: str = "torch-version") -> Observation:
    line = Line(source="env.log", lineno=1, text=f"torch {version}", host=host)
    return Observation(signature, (), "context", line, {"torch_version": version})


def test_local_build_tags_are_the_same_release() -> None:
    observations = [_version_line("node-a", "2.3.1+cu121"), _version_line("node-b", "2.3.1")]
    assert differing_versions(observations, build_rank_map(observations, ())) == []


def test_versions_nobody_can_be_tied_to_are_not_compared() -> None:
    observations = [_version_line(None, "2.3.1"), _version_line(None, "2.5.0")]
    assert differing_versions(observations, build_rank_map(observations, ())) == []


def test_two_hosts_on_two_releases_differ() -> None:
    observations = [_version_line("node-a", "2.3.1"), _version_line("node-b", "2.5.0+cu124")]
    found = differing_versions(observations, build_rank_map(observations, ()))
    assert sorted(str(o.fields["torch_version"]) for o in found) == ["2.3.1", "2.5.0+cu124"]


def test_old_pytorchs_misprinted_nccl_version_is_the_same_release() -> None:
    observations = [
        Observation("nccl-version", (), "context", Line("a.log", 1, "x", host=host), {"nccl_version": v})
        for host, v in (("node-a", "2.10.3"), ("node-b", "21.0.3"))
    ]
    assert differing_versions(observations, build_rank_map(observations, ())) == []


def test_the_nccl_version_fact_is_decoded_from_old_pytorchs_misprint(tmp_path: Path) -> None:
    text = (
        "RuntimeError: CUDA error: device-side assert triggered\n"
        "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:911, unhandled cuda error, "
        "NCCL version 21.1.4\n"
    )
    d = diagnose_text(tmp_path, text)
    assert d.facts["nccl_version"] == "2.11.4"


def test_a_hang_stopped_by_the_user_is_still_a_silent_hang_after_init(tmp_path: Path) -> None:
    text = "".join(
        _setup("dgx-box", 5100 + r, r, "enp65s0", "10.3.0.8", [((r + 1) % 2, "P2P/IPC/read")])
        for r in range(2)
    ) + (
        "W0112 08:30:00.123000 140112 torch/distributed/elastic/agent/server/api.py:704] Received "
        "Signals.SIGINT death signal, shutting down workers\n"
        "W0112 08:30:00.456000 140112 torch/distributed/elastic/multiprocessing/api.py:897] Sending process "
        "5100 closing signal SIGINT\n"
        "E0112 08:30:01.789000 140112 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: -2) local_rank: 0 (pid: 5100) of binary: /usr/bin/python3\n"
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[:2] == ["p2p/pcie-acs", "unknown"]
    assert d.culprit is None
    assert "hung right after NCCL initialisation" in (d.no_culprit_reason or "")


def test_nccls_report_alone_keeps_the_application_as_runner_up(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _NCCL_IMA)
    assert class_ids(d)[:2] == ["nccl/nvls-or-algorithm", "cuda/illegal-access"]
    assert d.diagnoses[1].confidence < 0.3


def test_since_progress_does_not_count_the_timeout_wait_twice(tmp_path: Path) -> None:
    """The watchdog line is written when the wait ends; the store adds the timeout itself, so the gap
    reported is from the last step to the start of the wait (10:01:00 -> 10:01:05)."""
    watchdog = (
        "[rank0]:[E0601 10:11:05.000000000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=121, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600000 milliseconds before timing out.\n"
    )
    text = _iteration("10:00:30", 110) + _iteration("10:01:00", 120) + watchdog
    d = diagnose_text(tmp_path, text)
    assert d.facts["since_progress_ms"] == 5_000
