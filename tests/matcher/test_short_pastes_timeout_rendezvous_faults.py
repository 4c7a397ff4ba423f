"""End-to-end excerpts in the shapes real users paste for the timeout family, rendezvous, CUDA faults,
host OOM, duplicate GPUs and peer exits: short, trimmed, often missing the line that names the cause.
Every excerpt here is written for this test (hosts, pids, paths and numbers are made up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.matcher.excerpts import class_ids, diagnose_text

CASES: dict[str, tuple[str, str]] = {
    "wrapped-collective-mismatch": (
        (
            "[rank2]: torch.distributed.DistBackendError: Detected mismatch between collectives on"
            " ranks. Rank 2 is running collective:\n"
            "[rank2]: CollectiveFingerPrint(SequenceNumber=88, OpType=ALLGATHER, TensorShape=[1,"
            " 4096], TensorDtypes=BFloat16,\n"
        ),
        "timeout/asymmetric-collectives",
    ),
    "nccl-own-mismatch-check": (
        (
            "node-a7:51020:51020 [4] NCCL WARN Mismatched collective detected, please check your"
            " collective calls at and around rank 9. You can use NCCL_DEBUG=INFO and"
            " NCCL_DEBUG_SUBSYS=COLL to see the collective logs\n"
        ),
        "timeout/asymmetric-collectives",
    ),
    "lightning-unused-parameters": (
        (
            "Epoch 0:  37%|███▋      | 118/320 [01:02<01:46,  1.90it/s, v_num=3]\n"
            "[rank: 1] RuntimeError: It looks like your LightningModule has parameters that were not"
            " used in producing the loss returned by training_step. If this is intentional, you must"
            " enable the detection of unused parameters in DDP.\n"
        ),
        "timeout/asymmetric-collectives",
    ),
    "extension-lock-stack-after-ctrl-c": (
        (
            '  File "/srv/venv/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line 1725,'
            " in _jit_compile\n"
            "    baton.wait()\n"
            '  File "/srv/venv/lib/python3.11/site-packages/torch/utils/file_baton.py", line 43, in'
            " wait\n"
            "    time.sleep(self.wait_seconds)\n"
            "KeyboardInterrupt\n"
        ),
        "timeout/jit-compile",
    ),
    "plugin-setup-then-silence": (
        (
            'Setting up PyTorch plugin "filtered_lrelu_plugin"...\n'
            'Setting up PyTorch plugin "filtered_lrelu_plugin"...\n'
        ),
        "timeout/jit-compile",
    ),
    "triton-kernel-assert": (
        (
            "/tmp/torchinductor_ml/x4/cx4k2.py:88: unknown: block: [905,0,0], thread: [3,0,0]"
            " Assertion `index out of bounds: 0 <= tmp5 < 50304` failed.\n"
            "[rank5]:[E1003 08:01:22.114 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg)"
            " Rank 5] Process group watchdog thread terminated with exception: CUDA error: device-side"
            " assert triggered\n"
        ),
        "cuda/illegal-access",
    ),
    "cuda-error-tail-only": (
        (
            "CUDA kernel errors might be asynchronously reported at some other API call, so the"
            " stacktrace below might be incorrect.\n"
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
        ),
        "cuda/illegal-access",
    ),
    "cumem-allocator-oom": (
        (
            "(RolloutWorker pid=90211) RuntimeError: CUDA Error: out of memory at"
            " /build/vllm/csrc/cumem_allocator.cpp:63\n"
        ),
        "cuda/oom",
    ),
    "ray-memory-monitor": (
        (
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
            "Memory on the node (IP: 10.9.1.4, ID: c0ffee) where the task (actor ID: 77ab,"
            " name=Trainer.fit, pid=3301, memory used=120.5GB) was running was 243.0GB / 251.6GB"
            " (0.9658), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID:"
            " 9911) because it was the most recently scheduled task.\n"
        ),
        "system/host-oom",
    ),
    "sigkill-while-loading-shards": (
        (
            "Loading checkpoint shards:  43%|████▎     | 3/7 [01:12<01:36, 24.1s/it]\n"
            "[2025-02-03 09:12:44,101] torch.distributed.elastic.multiprocessing.api: [ERROR] failed"
            " (exitcode: -9) local_rank: 0 (pid: 48120) of binary: /opt/conda/bin/python\n"
        ),
        "system/host-oom",
    ),
    "sigkill-in-a-chinese-title": (
        "deepspeed 全量微调 chatglm 返回错误码 -9 是什么原因\n",
        "system/host-oom",
    ),
    "sigkill-from-a-shell-launcher": (
        ("Loading extension module cpu_adam...\n[launcher] worker 1 exited with code -9\n"),
        "system/host-oom",
    ),
    "store-workers-never-joined": (
        (
            "[rank0]: torch.distributed.DistStoreError: Timed out after 301 seconds waiting for"
            " workers. 2/4 workers joined.\n"
        ),
        "rendezvous/store",
    ),
    "yolo-rank-zero-first": (
        (
            '  File "/opt/app/trainer.py", line 210, in build_loader\n'
            "    with torch_distributed_zero_first(LOCAL_RANK):  # cache labels once\n"
            '  File "/usr/lib/python3.10/contextlib.py", line 135, in __enter__\n'
            "KeyboardInterrupt\n"
        ),
        "timeout/rank0-only-work",
    ),
    "sglang-ranks-not-loaded": (
        (
            "Loading safetensors checkpoint shards:  97% Completed | 158/163 [29:40<00:55, 11.1s/it]\n"
            "[2025-07-09 02:14:51 TP0] RuntimeError: Rank 0 could finish the model loading, but there"
            " are other ranks that didn't finish loading. It is likely due to unexpected failures"
            " (e.g., OOM) or a slow node.\n"
        ),
        "timeout/straggler-input",
    ),
    "gloo-writev-reset": (
        (
            "terminate called after throwing an instance of 'gloo::IoException'\n"
            "  what():  [/src/third_party/gloo/gloo/transport/tcp/pair.cc:402] writev"
            " [10.8.0.21]:51377: Connection reset by peer\n"
        ),
        "network/peer-exit",
    ),
    "bare-invalid-usage": (
        (
            "Traceback (most recent call last):\n"
            '  File "train.py", line 61, in <module>\n'
            "    model = DDP(model, device_ids=[args.local_rank])\n"
            "RuntimeError: NCCL error in: /opt/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:911,"
            " invalid usage, NCCL version 2.7.8\n"
        ),
        "config/duplicate-gpu",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_shaped_excerpt_gets_its_class(tmp_path: Path, name: str) -> None:
    text, expected = CASES[name]
    assert class_ids(diagnose_text(tmp_path, text))[0] == expected


def test_ray_out_of_memory_error_is_not_a_cuda_oom(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, CASES["ray-memory-monitor"][0])
    assert "cuda/oom" not in [c.class_id for c in d.diagnoses]


def test_a_kernel_assert_outranks_the_cuda_error_tail(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, CASES["triton-kernel-assert"][0] + CASES["cuda-error-tail-only"][0])
    assert class_ids(d)[0] == "cuda/illegal-access"
    signatures = {e.signature for e in d.diagnoses[0].evidence}
    assert "cuda-kernel-assertion" in signatures


def test_a_named_oom_outranks_the_weak_cuda_error_tail(tmp_path: Path) -> None:
    text = (
        "[rank3]: RuntimeError: CUDA error: out of memory\n"
        "[rank3]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "cuda/oom"


def test_a_timeout_keeps_the_loading_clue_when_no_worker_was_killed(tmp_path: Path) -> None:
    text = (
        "Loading safetensors checkpoint shards:  55% Completed | 44/80 [09:12<07:30, 12.5s/it]\n"
        "[rank6]:[E0312 04:40:10.555 ProcessGroupNCCL.cpp:632] [Rank 6] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
        "600013 milliseconds before timing out.\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "timeout/straggler-input"


def test_a_large_broadcast_mid_run_is_not_read_as_a_rank0_sync_point(tmp_path: Path) -> None:
    text = (
        "[rank2]:[E0502 11:21:42.602 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 2] Process group "
        "watchdog thread terminated with exception: [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=81234, OpType=BROADCAST, NumelIn=1572864, NumelOut=1572864, Timeout(ms)=600000) ran "
        "for 600090 milliseconds before timing out.\n"
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] != "timeout/rank0-only-work"


def test_a_small_broadcast_of_the_default_timeout_still_points_at_rank0(tmp_path: Path) -> None:
    text = (
        "[rank3]:[E0502 11:21:42.602 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 3] Process group "
        "watchdog thread terminated with exception: [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran "
        "for 1800044 milliseconds before timing out.\n"
    )
    d = diagnose_text(tmp_path, text)
    assert "timeout/rank0-only-work" in [c.class_id for c in d.diagnoses[:2]]


_PEER_TIMEOUT = (
    "[rank9]:[E1104 07:00:10.100 ProcessGroupNCCL.cpp:632] [Rank 9] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=4194304, NumelOut=4194304, Timeout(ms)=600000) "
    "ran for 600021 milliseconds before timing out.\n"
)


def test_a_killed_rank_explains_the_timeouts_of_its_peers(tmp_path: Path) -> None:
    text = _PEER_TIMEOUT + (
        "E1104 07:00:13.000000 4400 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: -9) local_rank: 0 (pid: 4411) of binary: /usr/bin/python3\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "system/host-oom"


def test_kills_after_a_watchdog_abort_are_teardown_not_the_cause(tmp_path: Path) -> None:
    text = _PEER_TIMEOUT + (
        "E1104 07:00:13.000000 4400 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: -6) local_rank: 1 (pid: 4412) of binary: /usr/bin/python3\n"
        "  exitcode  : -9 (pid: 4411)\n"
        "  traceback : Signal 9 (SIGKILL) received by PID 4411\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] != "system/host-oom"


def test_a_rank_stuck_in_an_earlier_collective_is_behind_its_peers(tmp_path: Path) -> None:
    text = (
        "[rank0]:[E0407 10:02:11.100 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=733, OpType=ALLREDUCE, NumelIn=8388608, NumelOut=8388608, "
        "Timeout(ms)=600000) ran for 600011 milliseconds before timing out.\n"
        "[rank0]:[E0407 10:02:11.200 ProcessGroupNCCL.cpp:1664] [PG 0 Rank 0] Exception (either an error or "
        "timeout) detected by watchdog at work: 733, last enqueued NCCL work: 733, last completed NCCL work: "
        "732.\n"
        "[rank1]:[E0407 10:02:11.300 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=734, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
        "600020 milliseconds before timing out.\n"
    )
    d = diagnose_text(tmp_path, text)
    assert d.culprit is not None and d.culprit.ranks == (0,)
    assert class_ids(d)[0] in ("timeout/asymmetric-collectives", "timeout/straggler-input")


@pytest.mark.parametrize(
    "paste",
    [
        "cuda out of memory\n",
        "Training crashes with CUDA OOM on rank 3 after 2k steps, the others hit the NCCL watchdog\n",
        "多卡训练时显存不足，其他卡报 NCCL timeout\n",
    ],
)
def test_gpu_memory_exhaustion_in_the_users_own_words_reads_as_cuda_oom(tmp_path: Path, paste: str) -> None:
    assert class_ids(diagnose_text(tmp_path, paste))[0] == "cuda/oom"


def test_a_host_oom_kill_is_not_read_as_gpu_memory(tmp_path: Path) -> None:
    text = "[ 5123.0012] Out of memory: Killed process 4123 (python3) total-vm:1234kB, anon-rss:99999kB\n"
    assert class_ids(diagnose_text(tmp_path, text))[0] == "system/host-oom"
