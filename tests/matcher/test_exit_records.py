# ruff: noqa: E501  (log lines are quoted whole, as the tools print them)
"""Culprits from the launchers' records of how workers ended, and from a first Python exception.

Every excerpt is written for these tests (hosts, pids, paths and times are invented) in the shapes torchrun,
torch.multiprocessing.spawn, Slurm and Ray print. The whole matcher runs on them.
"""

from __future__ import annotations

import json
from pathlib import Path

from matcher.pipeline import diagnose
from tests.cli.helpers import run_cli
from tests.matcher.excerpts import class_ids, diagnose_text

SIGKILLED_RANK_ON_LOOPBACK = """
[rank0]:[E1201 10:00:01.000000000 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5
ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
Last error:
socketProgress: Connection closed by remote peer 127.0.0.1<48211>
[rank1]:[E1201 10:00:01.100000000 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5
W1201 10:00:02.000000 811 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 900 closing signal SIGTERM
E1201 10:00:03.000000 811 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 3 (pid: 903) of binary: /usr/bin/python3
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_10:00:03
  host      : localhost
  rank      : 3 (local_rank: 3)
  exitcode  : -9 (pid: 903)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 903
"""


def test_a_sigkilled_worker_outranks_the_peers_it_left_and_loopback_is_no_culprit(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, SIGKILLED_RANK_ON_LOOPBACK)
    assert class_ids(d)[0] == "system/host-oom"
    assert d.culprit is not None and d.culprit.ranks == (3,)
    assert d.culprit.hosts == () and "SIGKILL" in d.culprit.reason


def test_no_suggested_command_targets_loopback(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    path.write_text(SIGKILLED_RANK_ON_LOOPBACK.lstrip())
    result = run_cli("diagnose", "--no-store", "--json", str(path))
    document = json.loads(result.stdout)
    commands = [s.get("command") or "" for s in document["runbook"]["steps"]]
    assert commands and not any("127.0.0.1" in c or "localhost" in c for c in commands)


def test_without_the_launcher_record_a_loopback_peer_names_nobody(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, "\n".join(SIGKILLED_RANK_ON_LOOPBACK.strip().splitlines()[:5]))
    assert class_ids(d)[0] == "network/peer-exit"
    assert d.culprit is None or not d.culprit.hosts


KEYERROR_ON_RANK_2 = """
[rank2]: Traceback (most recent call last):
[rank2]:   File "/work/train.py", line 88, in <module>
[rank2]:     main()
[rank2]:   File "/work/train.py", line 61, in main
[rank2]:     loss = step(batch["labels"])
[rank2]: KeyError: 'labels'
[rank0]:[E1201 10:30:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
[rank1]:[E1201 10:30:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600015 milliseconds before timing out.
[rank3]:[E1201 10:30:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600011 milliseconds before timing out.
E1201 10:30:05.000000 700 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 2 (pid: 702) of binary: /usr/bin/python3
"""


def test_an_exception_on_one_rank_is_the_first_failure_with_type_and_line(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, KEYERROR_ON_RANK_2)
    assert class_ids(d)[0] == "application/python-exception"
    assert d.culprit is not None and d.culprit.ranks == (2,)
    assert "KeyError" in d.culprit.reason and "/work/train.py:61" in d.culprit.reason
    assert (d.facts["exception"], d.facts["code_file"], d.facts["code_line"]) == (
        "KeyError",
        "/work/train.py",
        61,
    )


def test_the_summaries_name_the_exception(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    path.write_text(KEYERROR_ON_RANK_2.lstrip())
    document = json.loads(run_cli("diagnose", "--no-store", "--json", str(path)).stdout)
    engineer = document["runbook"]["summaries"]["engineer"]
    assert "Rank 2 raised KeyError at /work/train.py:61" in engineer


def test_a_distributed_error_raised_on_every_rank_is_no_ordinary_exception(tmp_path: Path) -> None:
    text = "".join(
        f"[rank{r}]: Traceback (most recent call last):\n"
        f'[rank{r}]:   File "/work/train.py", line 40, in <module>\n'
        f"[rank{r}]:     dist.barrier()\n"
        f"[rank{r}]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3936, "
        "remote process exited or there was a network error, NCCL version 2.21.5\n"
        for r in range(2)
    )
    d = diagnose_text(tmp_path, text)
    assert "application/python-exception" not in class_ids(d)


def _mismatch(me: int, my_op: str, other: int, other_op: str) -> str:
    return (
        f"[rank{me}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {me} is running "
        f"collective: CollectiveFingerPrint(SequenceNumber=52, OpType={my_op}, TensorShape=[64], "
        f"TensorDtypes=Float), but Rank {other} is running collective: CollectiveFingerPrint(SequenceNumber=52, "
        f"OpType={other_op}, TensorShape=[64], TensorDtypes=Float).\n"
    )


def test_detail_mismatch_reports_name_the_odd_rank_out(tmp_path: Path) -> None:
    text = "".join(_mismatch(r, "ALLREDUCE", 5, "BROADCAST") for r in (0, 1, 2)) + _mismatch(
        5, "BROADCAST", 0, "ALLREDUCE"
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "timeout/asymmetric-collectives"
    assert d.culprit is not None and d.culprit.ranks == (5,) and "odd one out" in d.culprit.reason


def test_one_mismatch_report_cannot_tell_which_side_differs(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, _mismatch(0, "ALLREDUCE", 5, "BROADCAST"))
    assert d.culprit is None and d.no_culprit_reason


def test_spawn_names_the_process_that_raised_and_its_exception(tmp_path: Path) -> None:
    text = """
Traceback (most recent call last):
  File "/opt/job/launch.py", line 30, in <module>
    mp.spawn(worker, nprocs=4)
torch.multiprocessing.spawn.ProcessRaisedException:

-- Process 1 terminated with the following error:
Traceback (most recent call last):
  File "/opt/env/lib/python3.10/site-packages/torch/multiprocessing/spawn.py", line 69, in _wrap
    fn(i, *args)
  File "/opt/job/worker.py", line 77, in worker
    images = decode(sample)
ValueError: cannot decode sample 18341
"""
    d = diagnose_text(tmp_path, text)
    assert d.culprit is not None and d.culprit.ranks == (1,)
    assert "ValueError" in d.culprit.reason and "/opt/job/worker.py:77" in d.culprit.reason


def test_a_crash_under_srun_names_its_node(tmp_path: Path) -> None:
    text = """
[rank4]:[E1201 08:00:00.000000000 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 4] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.23.4
srun: error: gpu-node-105: task 7: Segmentation fault (core dumped)
srun: error: gpu-node-104: tasks 0-6: Killed
"""
    d = diagnose_text(tmp_path, text)
    assert d.culprit is not None and d.culprit.hosts == ("gpu-node-105",)
    assert "SIGSEGV" in d.culprit.reason
    assert "system/host-oom" not in class_ids(d)[:1]


def test_a_dead_ray_actor_names_its_node(tmp_path: Path) -> None:
    text = """
(RayWorkerWrapper pid=5120, ip=10.8.3.22) [rank1]:[E1201 09:00:00.000000000 ProcessGroupNCCL.cpp:542] [Rank 1] Collective WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1800000) raised the following async exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5
ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
	class_name: WorkerDict
	actor_id: 4c11aa
	pid: 7301
	namespace: 1f2e
	ip: 10.8.3.21
The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR
"""
    d = diagnose_text(tmp_path, text)
    assert d.culprit is not None and "10.8.3.21" in d.culprit.hosts


def test_a_watchdog_abort_is_only_collateral(tmp_path: Path) -> None:
    text = """
[rank1]:[E1201 07:00:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=40, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.
E1201 07:00:09.000000 300 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 1 (pid: 301) of binary: /usr/bin/python3
"""
    d = diagnose_text(tmp_path, text)
    assert "system/host-oom" not in class_ids(d)
    assert d.culprit is None or 1 not in d.culprit.ranks


def test_a_local_rank_of_a_multi_node_job_is_not_a_global_rank(tmp_path: Path) -> None:
    text = """
node-a:2201:2290 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA
node-b:4101:4190 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via NET/IB/0/GDRDMA
E1201 06:00:03.000000 811 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 3 (pid: 903) of binary: /usr/bin/python3
"""
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "system/host-oom"
    assert d.culprit is None or 3 not in d.culprit.ranks


def test_open_mpi_names_the_first_rank_that_exited_non_zero_for_a_rankless_root_line(tmp_path: Path) -> None:
    # A plain exit code only says which rank went first once a root line says what happened.
    text = """
RuntimeError: CUDA error: an illegal memory access was encountered
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[45678,1],6]
  Exit code:    1
--------------------------------------------------------------------------
"""
    d = diagnose_text(tmp_path, text)
    assert d.culprit is not None and d.culprit.ranks == (6,)
    assert "Open MPI" in d.culprit.reason


def test_without_a_root_line_a_plain_open_mpi_exit_code_names_nobody(tmp_path: Path) -> None:
    text = """
[rank5]:[E1201 05:00:00.000000000 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 5] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[45678,1],6]
  Exit code:    1
"""
    d = diagnose_text(tmp_path, text)
    assert d.culprit is None or 6 not in d.culprit.ranks


def test_a_rank_that_called_mpi_abort_is_the_culprit_of_a_rankless_root_line(tmp_path: Path) -> None:
    text = """
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD
with errorcode 1.

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.
--------------------------------------------------------------------------
"""
    d = diagnose_text(tmp_path, text)
    assert d.culprit is not None and d.culprit.ranks == (2,)


def test_open_mpi_5_wraps_the_signal_of_a_killed_rank_onto_the_next_line(tmp_path: Path) -> None:
    text = """
[rank0]:[E1201 05:20:00.000000000 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5
prterun noticed that process rank 3 with PID 41211 on node gpu-node-017 exited on
signal 9 (Killed).
"""
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "system/host-oom"
    assert d.culprit is not None and d.culprit.ranks == (3,) and "gpu-node-017" in d.culprit.hosts


def test_a_ray_node_marked_dead_names_its_address(tmp_path: Path) -> None:
    text = """
(RayTrainWorker pid=5120, ip=10.8.3.22) [rank1]:[E1201 09:00:00.000000000 ProcessGroupNCCL.cpp:542] [Rank 1] Collective WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1800000) raised the following async exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5
2026-12-01 09:00:05,774 WARNING worker.py:1866 -- The node with node id: 9426f445 and address: 10.8.3.40 and node name: 10.8.3.40 has been marked dead because the detector has missed too many heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, preempted node, etc.)
"""
    d = diagnose_text(tmp_path, text)
    assert d.culprit is not None and "10.8.3.40" in d.culprit.hosts


def test_a_floating_point_exception_under_srun_names_its_node_and_signal(tmp_path: Path) -> None:
    text = """
[rank4]:[E1201 08:00:00.000000000 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 4] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.23.4
srun: error: gpu-node-105: task 7: Floating point exception (core dumped)
srun: error: gpu-node-104: tasks 0-6: Killed
"""
    d = diagnose_text(tmp_path, text)
    assert d.culprit is not None and d.culprit.hosts == ("gpu-node-105",)
    assert "SIGFPE" in d.culprit.reason


AGENT_TEARDOWN = """
W1201 22:22:43.752000 6290 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:1298] The node 'gpu-b_6290_0' has failed to shutdown the rendezvous 'job7' due to an error of type RendezvousConnectionError.
torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.
"""
WORKER_KILLED = """
E1201 22:22:42.984000 6291 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 6300) of binary: /usr/bin/python3
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_22:22:42
  host      : gpu-a
  rank      : 3 (local_rank: 1)
  exitcode  : -9 (pid: 6300)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 6300
"""


def test_rendezvous_errors_written_after_a_killed_worker_are_the_teardown_it_caused(tmp_path: Path) -> None:
    (tmp_path / "gpu-a").mkdir()
    (tmp_path / "gpu-b").mkdir()
    (tmp_path / "gpu-a" / "torchrun.out").write_text(WORKER_KILLED.lstrip())
    (tmp_path / "gpu-b" / "torchrun.out").write_text(AGENT_TEARDOWN.lstrip())
    d = diagnose([str(tmp_path)]).diagnosis
    assert class_ids(d)[0] == "system/host-oom"
    assert d.culprit is not None and d.culprit.ranks == (3,) and d.culprit.hosts == ("gpu-a",)


def test_a_rendezvous_failure_written_before_the_death_stays_the_cause(tmp_path: Path) -> None:
    # The same agent lines, a second before the worker died: the store went first, the kill came after.
    before = AGENT_TEARDOWN.replace("22:22:43.752000", "22:22:41.500000")
    d = diagnose_text(tmp_path, before + WORKER_KILLED)
    assert class_ids(d)[0] == "rendezvous/store"


def test_the_rank_that_reports_a_store_barrier_timeout_only_waited(tmp_path: Path) -> None:
    text = "RuntimeError: Timed out initializing process group in store based barrier on rank: 7, for key: store_based_barrier_key:1 (world_size=8, worker_count=9, timeout=0:30:00)\n"
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "rendezvous/store"
    assert d.culprit is None and d.no_culprit_reason is not None and "waited" in d.no_culprit_reason


def _per_rank_logs(root: Path, ranks: dict[int, str]) -> Path:
    for rank, text in ranks.items():
        folder = root / "attempt_0" / str(rank)
        folder.mkdir(parents=True)
        (folder / "stderr.log").write_text(text)
    return root


GLOO_TIMEOUT = "[rank{r}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 60000ms for recv operation to complete\n"


def test_the_rank_whose_own_file_stays_silent_among_timeouts_is_named(tmp_path: Path) -> None:
    logs = {r: GLOO_TIMEOUT.format(r=r) for r in (0, 1, 3)} | {2: ""}
    d = diagnose([str(_per_rank_logs(tmp_path, logs))]).diagnosis
    assert d.culprit is not None and d.culprit.ranks == (2,)


def test_a_rank_without_a_file_is_not_taken_for_a_silent_one(tmp_path: Path) -> None:
    # Rank 2's file was not uploaded: its silence is not evidence.
    logs = {r: GLOO_TIMEOUT.format(r=r) for r in (0, 1, 3)}
    d = diagnose([str(_per_rank_logs(tmp_path, logs))]).diagnosis
    assert d.culprit is None or 2 not in d.culprit.ranks


SRUN_KILL_ON_BAD_EXIT = """
1: [rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [10.0.0.3]:4295: Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the application. Check the logs of the remote worker before reporting an error.
srun: error: gpu-node-07: task 2: Killed
srun: launch/slurm: _step_signal: Terminating StepId=269.0
0: slurmstepd-gpu-node-07: error: *** STEP 269.0 ON gpu-node-07 CANCELLED AT 2026-12-01T23:12:33 ***
srun: error: gpu-node-07: tasks 0-1,3: Terminated
"""


def test_one_srun_task_killed_before_srun_cancels_the_step_is_the_host_oom_killers(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, SRUN_KILL_ON_BAD_EXIT)
    assert class_ids(d)[0] == "system/host-oom"
    assert d.symptom != "hang-reported"  # gloo's "caused by a remote worker hanging" is no hang report
    assert d.culprit is not None and d.culprit.ranks == (2,) and d.culprit.hosts == ("gpu-node-07",)


def test_tasks_killed_after_a_time_limit_cancelled_the_step_are_no_oom(tmp_path: Path) -> None:
    text = (
        "0: slurmstepd-gpu-node-07: error: *** STEP 270.0 ON gpu-node-07 CANCELLED AT 2026-12-01T23:40:00 DUE TO TIME LIMIT ***\n"
        "srun: error: gpu-node-07: task 2: Killed\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] != "system/host-oom"
