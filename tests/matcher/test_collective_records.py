"""NCCL's COLL records (NCCL_DEBUG_SUBSYS=COLL) compared across processes: two processes naming different
collectives at one opCount of one communicator issued different collectives
(timeout/asymmetric-collectives, matcher.analysis.collectives). Records that could come from different
communicators or from one group call, and point-to-point records, prove nothing and change nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.model import Diagnosis
from matcher.pipeline import diagnose
from matcher.reading.read import ReadLimits, iter_blocks, iter_sources
from matcher.scanning import scan as scan_module
from tests.matcher.excerpts import class_ids, diagnose_text

ASYMMETRIC = "timeout/asymmetric-collectives"


def _record(pid: int, dev: int, op: str, op_count: int, count: int, comm: str, nranks: int = 4) -> str:
    return (
        f"node-a:{pid}:{pid} [{dev}] NCCL INFO {op}: opCount {op_count:x} sendbuff 0x7f5dd32b2100 "
        f"recvbuff 0x7f5dd32b2100 count {count} datatype 7 op 0 root 0 comm {comm} [nranks={nranks}] "
        f"stream 0x55bef0208bd0\n"
    )


def _comm(pid: int) -> str:
    """The address of a process's one communicator (each process has its own)."""
    return f"0x55be{pid:x}"


def _same_start(pids: list[int]) -> str:
    """Each process enqueues the same first collectives on its one communicator."""
    lines = []
    for op_count in (0x28A, 0x28B):
        for dev, pid in enumerate(pids):
            lines.append(_record(pid, dev, "AllReduce", op_count, 9984512, _comm(pid)))
    return "".join(lines)


def _asymmetric_evidence(diagnosis: Diagnosis) -> list[str]:
    """The COLL records cited for timeout/asymmetric-collectives."""
    found = next((c for c in diagnosis.diagnoses if c.class_id == ASYMMETRIC), None)
    return [] if found is None else [e.text for e in found.evidence if e.signature == "nccl-coll-record"]


def test_processes_naming_different_collectives_at_one_op_count_issued_different_ones(tmp_path: Path) -> None:
    text = (
        "AllGather / AllReduce hang\n"
        + _same_start([45006, 45012])
        + _record(45006, 0, "AllReduce", 0x28C, 9984512, _comm(45006))
        + _record(45012, 1, "AllGather", 0x28C, 59205120, _comm(45012))
    )
    diagnosis = diagnose_text(tmp_path, text)
    assert class_ids(diagnosis)[0] == ASYMMETRIC
    assert diagnosis.culprit is None  # two processes, one each way: neither is the odd one out
    shown = " ".join(_asymmetric_evidence(diagnosis))
    assert "AllReduce: opCount 28c" in shown and "AllGather: opCount 28c" in shown


def test_the_same_collective_with_a_different_count_is_a_disagreement_too(tmp_path: Path) -> None:
    text = _record(7001, 0, "AllReduce", 0x5, 1024, "0x1111") + _record(
        7002, 1, "AllReduce", 0x5, 2048, "0x2222"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == ASYMMETRIC


def test_processes_that_agree_at_every_op_count_show_no_disagreement(tmp_path: Path) -> None:
    text = "training hangs at step 100\n" + _same_start([45006, 45012, 45018])
    assert _asymmetric_evidence(diagnose_text(tmp_path, text)) == []


def test_a_group_call_under_one_op_count_is_no_disagreement(tmp_path: Path) -> None:
    # Process 45012 enqueued an AllGather and a ReduceScatter in one group (one opCount): its peers'
    # records at that opCount cannot be matched to one of them.
    text = (
        _record(45006, 0, "AllGather", 0x9, 4096, "0x1111")
        + _record(45006, 0, "ReduceScatter", 0x9, 4096, "0x1111")
        + _record(45012, 1, "AllGather", 0x9, 4096, "0x2222")
        + _record(45012, 1, "ReduceScatter", 0x9, 4096, "0x2222")
        + _record(45018, 2, "ReduceScatter", 0x9, 4096, "0x3333")
    )
    assert _asymmetric_evidence(diagnose_text(tmp_path, text)) == []


def test_a_process_with_two_communicators_is_not_compared(tmp_path: Path) -> None:
    # 45006 logs records of two communicators (say tensor- and data-parallel): which of them its opCount
    # belongs to is unknown to the peer's records.
    text = (
        _record(45006, 0, "AllReduce", 0x3, 1024, "0x1111")
        + _record(45006, 0, "AllGather", 0x4, 1024, "0x1112")
        + _record(45012, 1, "AllGather", 0x3, 1024, "0x2222")
    )
    assert _asymmetric_evidence(diagnose_text(tmp_path, text)) == []


def test_communicators_of_different_sizes_are_not_compared(tmp_path: Path) -> None:
    text = _record(7001, 0, "AllReduce", 0x5, 1024, "0x1111", nranks=8) + _record(
        7002, 1, "AllGather", 0x5, 1024, "0x2222", nranks=2
    )
    assert _asymmetric_evidence(diagnose_text(tmp_path, text)) == []


def _init(pid: int, dev: int, rank: int, comm: str, comm_id: str, nranks: int = 4) -> str:
    """NCCL 2.18+'s init line: the communicator's address in this process and its id in all of them."""
    return (
        f"node-a:{pid}:{pid + 90} [{dev}] NCCL INFO ncclCommInitRank comm {comm} rank {rank} nranks {nranks} "
        f"cudaDev {dev} nvmlDev {dev} busId {dev + 1}b000 commId {comm_id} - Init COMPLETE\n"
    )


@pytest.mark.parametrize(
    ("second_rank", "second_id", "cited"),
    [
        # A tensor- and a data-parallel group of four, each process rank 0 in its own: its last records
        # are on another communicator than the peer's.
        (0, "0x19c4d0e77f3a2b10", 0),
        (1, "0x8a1f2e3d4c5b6a79", 2),  # one communicator: both records cited
    ],
    ids=["two-groups-of-one-size", "one-communicator"],
)
def test_init_lines_commid_decides_whether_processes_of_one_size_are_compared(
    tmp_path: Path, second_rank: int, second_id: str, cited: int
) -> None:
    text = (
        _init(7001, 0, 0, "0x1111", "0x8a1f2e3d4c5b6a79")
        + _init(7002, 1, second_rank, "0x2222", second_id)
        + _record(7001, 0, "AllReduce", 0x5, 1024, "0x1111")
        + _record(7002, 1, "ReduceScatter", 0x5, 1024, "0x2222")
    )
    assert len(_asymmetric_evidence(diagnose_text(tmp_path, text))) == cited


def test_send_and_recv_records_differ_by_design(tmp_path: Path) -> None:
    text = _record(7001, 0, "Send", 0x5, 1024, "0x1111") + _record(7002, 1, "Recv", 0x5, 1024, "0x2222")
    assert _asymmetric_evidence(diagnose_text(tmp_path, text)) == []


def _long_run(pids: list[int], steps: int, last: dict[int, str]) -> str:
    """`steps` agreeing AllReduce records per process, interleaved, then one more per process: the
    collective `last` names for it."""
    lines = [
        _record(pid, dev, "AllReduce", step, 9984512, _comm(pid))
        for step in range(steps)
        for dev, pid in enumerate(pids)
    ]
    lines += [_record(pid, dev, last[pid], steps, 9984512, _comm(pid)) for dev, pid in enumerate(pids)]
    return "".join(lines)


def test_the_last_records_of_a_long_log_are_the_ones_compared(tmp_path: Path) -> None:
    # Hundreds of records per process before the hang: the scan never looks at them (tail signature),
    # and the last ones, where the processes parted, are read from the file's end.
    pids = [45006, 45012, 45018, 45024]
    text = _long_run(
        pids, 400, {45006: "AllReduce", 45012: "AllReduce", 45018: "AllGather", 45024: "AllReduce"}
    )
    assert len(text) > 256 * 1024
    paste = "training hangs after step 400\n" + text
    diagnosis = diagnose_text(tmp_path, paste)
    assert class_ids(diagnosis)[0] == ASYMMETRIC
    cited = next(c for c in diagnosis.diagnoses if c.class_id == ASYMMETRIC).evidence
    where = {e.line: e.text for e in cited if e.signature == "nccl-coll-record"}
    lines = paste.splitlines()
    assert any("AllGather: opCount 190" in text for text in where.values())
    assert all(lines[number - 1] in text or text in lines[number - 1] for number, text in where.items())


def test_each_rank_files_last_records_are_compared_across_the_files(tmp_path: Path) -> None:
    bundle = tmp_path / "logs"
    bundle.mkdir()
    text = _long_run([7001, 7002], 300, {7001: "AllReduce", 7002: "Broadcast"})
    for pid in (7001, 7002):
        (bundle / f"rank{pid - 7001}.log").write_text(
            "".join(line + "\n" for line in text.splitlines() if f":{pid}:" in line)
        )
    diagnosis = diagnose([str(bundle)]).diagnosis
    assert class_ids(diagnosis)[0] == ASYMMETRIC


def test_a_file_scanned_in_spans_by_workers_reads_its_tail_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "train.log"
    path.write_text(_long_run([45006, 45012], 6000, {45006: "AllReduce", 45012: "ReduceScatter"}))
    monkeypatch.setenv("NCCLBOT_WORKERS", "2")
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan_module, "FIRST_SPAN_BYTES", 256 * 1024)
    monkeypatch.setattr(scan_module, "SPAN_BYTES", 384 * 1024)
    assert path.stat().st_size > 3 * 384 * 1024  # several spans
    diagnosis = diagnose([str(path)]).diagnosis
    assert class_ids(diagnosis)[0] == ASYMMETRIC
    records = [e for c in diagnosis.diagnoses for e in c.evidence if e.signature == "nccl-coll-record"]
    assert sorted(e.text.split(": opCount")[0].rsplit(" ", 1)[1] for e in records) == [
        "AllReduce",
        "ReduceScatter",
    ]


def test_a_short_last_block_leaves_the_tail_in_the_block_before(tmp_path: Path) -> None:
    # Files are read in blocks of whole lines; the last one holds what is left, here one short line, so
    # the records the tail is read for lie in the block before it.
    limits = ReadLimits(block_bytes=64 * 1024)
    path = tmp_path / "train.log"
    records = _long_run([7001, 7002], 150, {7001: "AllReduce", 7002: "AllGather"})
    assert len(records) < limits.block_bytes
    for padding in range(0, limits.block_bytes - len(records), 16):  # until the cut falls before the end
        path.write_text(records + "x" * padding + "\nwatchdog: the job hangs\n")
        blocks = list(iter_blocks(next(iter_sources([str(path)], limits)), limits))
        if len(blocks) > 1 and len(blocks[-1].data) < 100:
            break
    assert len(blocks) > 1 and len(blocks[-1].data) < 100
    diagnosis = diagnose([str(path)], limits=limits).diagnosis
    assert class_ids(diagnosis)[0] == ASYMMETRIC
    lines = path.read_text().splitlines()
    cited = [e for c in diagnosis.diagnoses for e in c.evidence if e.signature == "nccl-coll-record"]
    assert cited and all(lines[e.line - 1].startswith(e.text[:60]) for e in cited)
