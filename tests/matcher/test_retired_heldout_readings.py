"""Readings learnt from the held-out threads retired to tuning (README "Measuring accuracy"): each is a
general form of an upstream wording or a cross-rank fact, checked on lines written for this test."""

from __future__ import annotations

from pathlib import Path

from tests.matcher.excerpts import class_ids, diagnose_text


def _watchdog(rank: int, seq: int, op: str, numel: int) -> str:
    return (
        f"[rank{rank}]:[E513 13:25:57.714781669 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught "
        f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, "
        f"NumelOut={numel}, Timeout(ms)=1800000) ran for 1800042 milliseconds before timing out.\n"
    )


def test_ranks_timing_out_in_collectives_of_different_types_issued_different_sequences(
    tmp_path: Path,
) -> None:
    # Ranks 1 and 2 wait in a broadcast, rank 0 already in a later all-gather: no side is a lagging
    # minority, and which side ran the extra collective cannot be told, so no culprit.
    text = (
        _watchdog(1, 532339, "BROADCAST", 5164000)
        + _watchdog(2, 532339, "BROADCAST", 5164000)
        + _watchdog(0, 532341, "_ALLGATHER_BASE", 513)
    )
    diagnosis = diagnose_text(tmp_path, text)
    assert class_ids(diagnosis)[0] == "timeout/asymmetric-collectives"
    assert diagnosis.culprit is None


def test_ranks_in_later_collectives_of_the_same_type_are_no_mismatch(tmp_path: Path) -> None:
    text = (
        _watchdog(1, 700, "ALLREDUCE", 1024)
        + _watchdog(2, 700, "ALLREDUCE", 1024)
        + _watchdog(0, 702, "ALLREDUCE", 1024)
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] != "timeout/asymmetric-collectives"


def test_a_store_barrier_that_counts_more_ranks_than_the_world_is_the_rendezvous(tmp_path: Path) -> None:
    waiting = (
        "Waiting in store based barrier to initialize process group for rank: 0, "
        "key: store_based_barrier_key:1 (world_size=4, worker_count=16, timeout=0:01:00)\n"
    )
    assert class_ids(diagnose_text(tmp_path, waiting * 2))[0] == "rendezvous/store"


def test_a_dataloader_worker_bus_error_without_the_shared_memory_hint_is_dev_shm(tmp_path: Path) -> None:
    text = "RuntimeError: DataLoader worker (pid 13) is killed by signal: Bus error.\n"
    assert class_ids(diagnose_text(tmp_path, text))[0] == "shm/dev-shm"


def test_a_dataloader_worker_killed_without_a_pid_is_the_oom_killer(tmp_path: Path) -> None:
    text = "RuntimeError: DataLoader worker is killed by signal: Killed.\n"
    assert class_ids(diagnose_text(tmp_path, text))[0] == "system/host-oom"


def test_nccl_2_4_connect_refused_without_a_function_name_points_at_the_interface(tmp_path: Path) -> None:
    text = (
        "id-d3:715:790 [1] include/socket.h:382 NCCL WARN Connect to 172.18.0.1<49273> failed : "
        "Connection refused\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "network/interface-selection"


def test_a_process_reported_killed_in_chinese_reads_as_the_oom_killer_unless_denied(tmp_path: Path) -> None:
    assert class_ids(diagnose_text(tmp_path, "无缘无故被kill掉了\n"))[0] == "system/host-oom"
    assert "system/host-oom" not in class_ids(diagnose_text(tmp_path, "进程没有被kill，只是卡住了\n"))[:1]


def test_an_illegal_memory_access_named_in_a_title_is_weaker_than_the_runtime_sentence(
    tmp_path: Path,
) -> None:
    title = diagnose_text(tmp_path, "Illegal memory access when executing grouped ncclSend/ncclRecvs\n")
    runtime = diagnose_text(tmp_path, "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert class_ids(title)[0] == class_ids(runtime)[0] == "cuda/illegal-access"
    assert title.primary.confidence < runtime.primary.confidence


def test_a_deepgemm_warmup_before_a_timeout_is_a_jit_build(tmp_path: Path) -> None:
    text = (
        "[2025-09-01 10:00:00 TP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time "
        "(typically 10-20 mins) if you have not run `sglang.compile_deep_gemm`.\n"
        + _watchdog(1, 2, "ALLREDUCE", 1)
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "timeout/jit-compile"
