"""Short pastes: a masked pid, a stage named in words beside a timeout, an IB completion's status, a bare
ncclSystemError and a capitalised NCCL result, each read the way the threads that resolved them say (learnt
from the fifteenth sweep's tuned part, README "Measuring accuracy"); every line is written for this test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.matcher.excerpts import class_ids, diagnose_text


@pytest.mark.parametrize(
    "line",
    [
        "g4:812:870 [2] NCCL WARN NET/IB : Got completion from peer 10.9.1.3<40111> with error 4, opcode 0, "
        "len 0, vendor err 81 (Send)",
        "g4:812:870 [2] NCCL WARN NET/IB : Got completion from peer 10.9.1.3<40111> with status=4 opcode=0 "
        "len=0 vendor err 81 (Recv) localGid ::ffff:10.9.1.4 remoteGids::ffff:10.9.1.3",
    ],
)
def test_an_ib_local_protection_error_is_gpudirect_blocked_on_pcie_before_the_fabric(
    tmp_path: Path, line: str
) -> None:
    assert class_ids(diagnose_text(tmp_path, line + "\n"))[:2] == ["p2p/pcie-acs", "network/ib-rdma"]


def test_an_ib_retry_timeout_stays_with_the_fabric(tmp_path: Path) -> None:
    line = (
        "g4:812:870 [2] NCCL WARN NET/IB : Got completion from peer 10.9.1.3<40111> with error 12, opcode 0, "
        "len 0, vendor err 129\n"
    )
    assert class_ids(diagnose_text(tmp_path, line))[0] == "network/ib-rdma"


def test_a_capitalised_nccl_result_in_a_title_is_read_like_the_runtime_string(tmp_path: Path) -> None:
    title = diagnose_text(tmp_path, "NCCL Error 1: unhandled CUDA error when training with DDP on 4 GPUs\n")
    runtime = diagnose_text(tmp_path, "RuntimeError: NCCL Error 1: unhandled cuda error\n")
    assert title.symptom == runtime.symptom == "nccl-error"
    assert class_ids(title)[0] == class_ids(runtime)[0] == "config/version-mismatch"


@pytest.mark.parametrize("pid", ["...", "XXXX", "<pid>", "…"])
def test_a_dataloader_worker_with_a_masked_pid_keeps_its_reading(tmp_path: Path, pid: str) -> None:
    worker = f"RuntimeError: DataLoader worker (pid {pid})"
    killed = diagnose_text(tmp_path, f"{worker} is killed by signal: Killed.\n")
    assert class_ids(killed)[0] == "system/host-oom"
    exited = diagnose_text(tmp_path, f"{worker} exited unexpectedly\n")
    assert (
        class_ids(exited)[0]
        == class_ids(
            diagnose_text(tmp_path, "RuntimeError: DataLoader worker (pid 4242) exited unexpectedly\n")
        )[0]
    )


def test_ranks_timing_out_while_yolo_validates_on_rank_0_name_rank_0s_solo_work(tmp_path: Path) -> None:
    # Ultralytics trains in DDP and validates on rank 0 alone; its table header is the progress bar's text.
    bar = " " * 17 + "Class     Images  Instances      Box(P          R      mAP50  mAP50-95):  {}%| {}/90"
    text = "\n".join(bar.format(p, n) for p, n in ((30, 27), (31, 28))) + "\n"
    for rank in (1, 2, 3):
        text += (
            f"[E ProcessGroupNCCL.cpp:566] [Rank {rank}] Watchdog caught collective operation timeout: "
            "WorkNCCL(OpType=BROADCAST, Timeout(ms)=60000) ran for 61283 milliseconds before timing out.\n"
        )
    diagnosis = diagnose_text(tmp_path, text)
    assert class_ids(diagnosis)[0] == "timeout/rank0-only-work"
    assert diagnosis.culprit is not None and diagnosis.culprit.ranks == (0,)
    assert "  " not in diagnosis.culprit.reason  # the table's padding is not quoted


@pytest.mark.parametrize(
    "report",
    [
        "Multi-GPU training: NCCL timeout during validation, Some NCCL operations have failed or timed out.",
        "验证的时候 NCCL 超时, Some NCCL operations have failed or timed out.",
    ],
)
def test_a_timeout_reported_during_evaluation_guesses_rank_0_solo_work(tmp_path: Path, report: str) -> None:
    assert class_ids(diagnose_text(tmp_path, report + "\n"))[0] == "timeout/rank0-only-work"


def test_evaluation_settings_beside_a_timeout_setting_are_no_stage(tmp_path: Path) -> None:
    text = "evaluation_strategy=steps, eval_steps=500, ddp_timeout=1800\n"
    assert "timeout/rank0-only-work" not in class_ids(diagnose_text(tmp_path, text))[:1]


def test_a_timed_out_communicator_id_fetch_guesses_rank_0_late_before_the_rendezvous(tmp_path: Path) -> None:
    text = (
        "[rank5]: torch.distributed.DistBackendError: [5] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: "
        "Socket Timeout\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[:2] == ["timeout/rank0-only-work", "rendezvous/store"]
