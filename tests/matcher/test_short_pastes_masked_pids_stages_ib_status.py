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


def test_a_cut_oom_kill_summary_is_still_the_kernel_oom_killer(tmp_path: Path) -> None:
    # The kernel writes this summary only for the victim it chose; the paste stops before task= / pid=.
    text = (
        "[81234.551190] [  31881]  1000 31881 274650088 243385180 1957441536     7930          -998 python\n"
        "[81234.551200] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=a1b2c3,mems_allowed=0-7\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "system/host-oom"


def test_an_nccl_symbol_named_without_its_colon_is_a_build_mismatch(tmp_path: Path) -> None:
    text = "undefined symbol ncclCommRegister when importing torch\n"
    assert class_ids(diagnose_text(tmp_path, text))[0] == "config/version-mismatch"


def test_a_bare_store_wait_timeout_guesses_a_late_writer_before_the_rendezvous(tmp_path: Path) -> None:
    diagnosis = diagnose_text(tmp_path, "RuntimeError: Socket Timeout\n")
    assert class_ids(diagnosis)[:2] == ["timeout/rank0-only-work", "rendezvous/store"]
    assert diagnosis.culprit is None


def test_a_title_naming_a_checkpoint_save_names_no_rank_when_nobody_is_seen_waiting(tmp_path: Path) -> None:
    title = diagnose_text(tmp_path, "Processes killed when saving checkpoints during training with zero2\n")
    assert title.culprit is None
    # The same clue beside the peers' timeouts does name rank 0.
    waited = diagnose_text(
        tmp_path,
        "[INFO|trainer.py:3000] >> Saving model checkpoint to /out/checkpoint-500\n"
        + "".join(
            f"[rank{r}]:[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
            "timeout: "
            "WorkNCCL(SeqNum=9001, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
            "1800064 milliseconds before timing out.\n"
            for r in (1, 2, 3)
        ),
    )
    assert waited.culprit is not None and waited.culprit.ranks == (0,)


def test_english_run_into_chinese_prose_is_read_like_a_spaced_line(tmp_path: Path) -> None:
    # Chinese prose puts no space around an English message; the message's own reading must still hold.
    run_in = diagnose_text(tmp_path, "两台机器训练,出现了socketFinalizeAccept: wrong type 3 != 4错误。\n")
    assert class_ids(run_in)[0] == "network/ib-rdma"


def test_a_digit_run_into_a_chinese_card_count_is_no_hang(tmp_path: Path) -> None:
    # "8卡在训练" is "eight cards are training", spaced or not; "卡在" alone is "stuck at".
    assert diagnose_text(tmp_path, "8卡在训练 llama, 一切正常\n").symptom != "hang-reported"
    assert diagnose_text(tmp_path, "训练卡在第一个allreduce\n").symptom == "hang-reported"


@pytest.mark.parametrize(
    "line, first",
    [
        (
            "gpu-a17:40121:40311 [2] graph/topo.h:230 NCCL WARN Could not find NET with id 0",
            "nccl/nvls-or-algorithm",
        ),
        (
            "rig-05:4766:4780 [0] NCCL INFO ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856",
            "nccl/nvls-or-algorithm",
        ),
        ("DataLoader worker (pid xxx) is killed by signal", "system/host-oom"),
    ],
)
def test_release_bugs_and_cut_worker_deaths_are_read(tmp_path: Path, line: str, first: str) -> None:
    assert class_ids(diagnose_text(tmp_path, line + "\n"))[0] == first


def test_the_watchdogs_stack_alone_is_a_collective_timeout(tmp_path: Path) -> None:
    text = (
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
        "std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in /opt/venv/lib/libtorch_cuda.so)\n"
        "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x1554e9e16333 in "
        "/opt/venv/lib/libtorch_cuda.so)\n"
    )
    diagnosis = diagnose_text(tmp_path, text)
    assert diagnosis.symptom == "collective-timeout"
    assert {"timeout/asymmetric-collectives", "timeout/rank0-only-work"} <= set(class_ids(diagnosis)[:3])


def test_accelerates_own_port_check_is_the_store_port_in_use(tmp_path: Path) -> None:
    text = (
        "ConnectionError: Tried to launch distributed communication on port `29500`, but another process is "
        "utilizing it. Please specify a different port (such as using the `--main_process_port` flag).\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "rendezvous/store"


def test_an_nccl_invalid_argument_alone_guesses_builds_that_do_not_work_together(tmp_path: Path) -> None:
    text = (
        "nodeA:2396:2428 [0] misc/argcheck.cc:40 NCCL WARN Reduce : invalid root 0 (root should be in the "
        "0..0 range)\nterminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  NCCL Error 4: invalid argument\n"
    )
    diagnosis = diagnose_text(tmp_path, text)
    assert class_ids(diagnosis)[0] == "config/version-mismatch"
    assert diagnosis.primary.confidence <= 0.45  # a guess looks like one


def test_a_c10d_socket_wait_timeout_is_a_store_wait_beside_rank_0s_tokenising(tmp_path: Path) -> None:
    text = (
        "Tokenizing Prompts (num_proc=64):  92%|█████████▏| 328986/359152 [29:58<12:05, 41.59 examples/s]\n"
        "[rank1]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=79, "
        "addr=[localhost]:41170, remote=[localhost]:29500) timed out after 1800000ms\n"
    )
    diagnosis = diagnose_text(tmp_path, text)
    assert diagnosis.symptom == "store-lost"
    assert class_ids(diagnosis)[:2] == ["timeout/rank0-only-work", "rendezvous/store"]
    assert diagnosis.culprit is not None and diagnosis.culprit.ranks == (0,)
