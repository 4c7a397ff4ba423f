"""Stack dumps of hung ranks (py-spy dump, faulthandler): what each rank was doing names the class, and
the rank busy elsewhere while the others waited in a collective is the culprit."""

from __future__ import annotations

from pathlib import Path

from matcher.pipeline import diagnose
from tests.matcher.excerpts import class_ids, diagnose_text

TIMEOUT = (
    "[rank{r}]:[E1129 03:11:40.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=4812, OpType=ALLREDUCE, NumelIn=25165824, NumelOut=25165824, "
    "Timeout(ms)=1800000) ran for 1800083 milliseconds before timing out.\n"
)
WAITING = """Process {pid}: /usr/bin/python3 train.py
Python v3.10.12 (/usr/bin/python3.10)

Thread {pid} (active): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2288)
    wrapper (torch/distributed/c10d_logger.py:83)
    train_step (train.py:141)
"""
LOADING = """Process {pid}: /usr/bin/python3 train.py
Python v3.10.12 (/usr/bin/python3.10)

Thread {pid} (idle): "MainThread"
    wait (threading.py:324)
    get (queue.py:180)
    _try_get_data (torch/utils/data/dataloader.py:1133)
    _get_data (torch/utils/data/dataloader.py:1294)
    _next_data (torch/utils/data/dataloader.py:1332)
    __next__ (torch/utils/data/dataloader.py:631)
    train (train.py:88)
"""
SAVING = """Thread 0x00007f3c2a1fe740 (most recent call first):
  File "/usr/lib/python3/dist-packages/torch/serialization.py", line 884 in _save
  File "/usr/lib/python3/dist-packages/torch/serialization.py", line 652 in save
  File "/work/train.py", line 201 in save_checkpoint
  File "/work/train.py", line 160 in train
"""


def _bundle(tmp_path: Path, busy_rank: int, busy_dump: str) -> list[str]:
    paths = []
    for rank in range(4):
        path = tmp_path / f"rank{rank}.log"
        dump = busy_dump if rank == busy_rank else WAITING.format(pid=5100 + rank)
        timeout = "" if rank == busy_rank else TIMEOUT.format(r=rank)
        path.write_text(timeout + dump.format(pid=5100 + rank), encoding="utf-8")
        paths.append(str(path))
    return paths


def test_the_rank_reading_input_while_the_others_wait_is_the_straggler_culprit(tmp_path: Path) -> None:
    d = diagnose(_bundle(tmp_path, 2, LOADING)).diagnosis
    assert d.primary.class_id == "timeout/straggler-input"
    assert d.culprit is not None and d.culprit.ranks == (2,)
    assert "reading input" in d.culprit.reason and "dataloader.py" in d.culprit.reason
    assert any("dataloader.py" in e.text for e in d.primary.evidence)


def test_the_rank_writing_a_checkpoint_while_the_others_wait_is_named_with_solo_work(tmp_path: Path) -> None:
    d = diagnose(_bundle(tmp_path, 0, SAVING)).diagnosis
    assert d.primary.class_id == "timeout/rank0-only-work"
    assert d.culprit is not None and d.culprit.ranks == (0,)


def test_dumps_of_ranks_that_all_wait_in_the_collective_name_nobody(tmp_path: Path) -> None:
    d = diagnose(_bundle(tmp_path, 9, "")).diagnosis
    assert d.culprit is None


def test_a_single_pasted_dump_of_a_loading_process_is_an_input_clue(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, TIMEOUT.format(r=1) + LOADING.format(pid=77))
    assert class_ids(d)[0] == "timeout/straggler-input"


def test_exception_tracebacks_are_no_stack_dump(tmp_path: Path) -> None:
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1332, in _next_data\n'
        "    return self._process_data(data)\n"
        "KeyError: 'labels'\n"
    )
    d = diagnose_text(tmp_path, traceback)
    assert "timeout/straggler-input" not in class_ids(d)[:1]


INTERRUPTED_DDP = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 80, in <module>\n'
    "    model = DDP(model, device_ids=[rank])\n"
    '  File "/usr/lib/python3/dist-packages/torch/nn/parallel/distributed.py", line 798, in __init__\n'
    "    _verify_param_shape_across_processes(self.process_group, parameters)\n"
    '  File "/usr/lib/python3/dist-packages/torch/distributed/utils.py", line 269, in '
    "_verify_param_shape_across_processes\n"
    "    return dist._verify_params_across_processes(process_group, tensors, logger)\n"
    "KeyboardInterrupt\n"
)


def test_a_job_stopped_while_hung_in_ddp_construction_on_one_machine_suggests_p2p(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, INTERRUPTED_DDP)
    assert class_ids(d)[0] == "p2p/pcie-acs"
    assert d.culprit is None


def test_the_same_hang_across_hosts_suggests_the_interface_first(tmp_path: Path) -> None:
    setup = (
        "node-a:4100:4100 [0] NCCL INFO Bootstrap : Using ens5:10.0.1.4<0>\n"
        "node-b:4200:4200 [0] NCCL INFO Bootstrap : Using ens5:10.0.1.5<0>\n"
    )
    d = diagnose_text(tmp_path, setup + INTERRUPTED_DDP)
    assert class_ids(d)[0] == "network/interface-selection"


def test_a_job_stopped_while_hung_in_init_process_group_is_a_rendezvous_problem(tmp_path: Path) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 21, in <module>\n'
        '    dist.init_process_group("nccl")\n'
        '  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 1570, in '
        "init_process_group\n"
        "    store, rank, world_size = next(rendezvous_iterator)\n"
        "KeyboardInterrupt\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "rendezvous/store"
