"""End to end through matcher.pipeline on generated multi-rank jobs: the right class, the right culprit,
and no culprit where the logs cannot name one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from matcher.model import Diagnosis
from tests.fixtures.multirank import LAYOUTS, SCENARIOS, Expected, Layout, Scenario, host_of, write_job


def _diagnose(root: Path) -> Diagnosis:
    pipeline = pytest.importorskip(
        "matcher.pipeline", reason="matcher.pipeline (reader + scanner) not merged yet"
    )
    try:
        return pipeline.diagnose([str(root)]).diagnosis
    except NotImplementedError:
        pytest.skip("the reader or scanner is still a placeholder on this branch")


def _check(d: Diagnosis, expected: Expected, world: int) -> None:
    assert d.primary.class_id == expected.class_id, (d.primary, d.culprit, d.no_culprit_reason)
    if not expected.named:
        assert d.culprit is None, d.culprit
        assert d.no_culprit_reason
        return
    assert d.culprit is not None, d.no_culprit_reason
    if expected.ranks is not None:
        assert d.culprit.ranks == expected.ranks
    if expected.hosts is not None:
        assert d.culprit.hosts == expected.hosts
    assert set(d.culprit.ranks) <= set(range(world))
    assert d.symptom == "collective-timeout"


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_eight_ranks(tmp_path: Path, layout: Layout, scenario: Scenario) -> None:
    expected = write_job(tmp_path, 8, layout, scenario, culprit=5)
    _check(_diagnose(tmp_path), expected, 8)


@pytest.mark.parametrize(
    ("world", "layout", "scenario", "culprit"),
    [
        (64, "torchrun", "lagging", 37),
        (64, "slurm", "xid", 50),
        (128, "interleaved", "oom", 0),
        (512, "slurm", "mismatch", 311),
        (512, "interleaved", "lagging", 509),
        (512, "torchrun", "all-stuck", 0),
    ],
)
def test_large_jobs(tmp_path: Path, world: int, layout: Layout, scenario: Scenario, culprit: int) -> None:
    expected = write_job(tmp_path, world, layout, scenario, culprit)
    _check(_diagnose(tmp_path), expected, world)


# --- the generator itself: a wrong fixture would make the tests above meaningless --------------------


def test_torchrun_layout_puts_each_rank_in_its_own_folder(tmp_path: Path) -> None:
    write_job(tmp_path, 16, "torchrun", "oom", culprit=11)
    for stderr in tmp_path.glob("*/attempt_0/*/stderr.log"):
        host, local = stderr.parts[-4], int(stderr.parts[-2])
        tags = {int(m) for m in re.findall(r"^\[rank(\d+)\]:", stderr.read_text(), re.M)}
        assert len(tags) == 1
        rank = tags.pop()
        assert rank % 8 == local and host_of(rank) == host
    oom = (tmp_path / host_of(11) / "attempt_0" / "3" / "stderr.log").read_text()
    assert "[rank11]: torch.OutOfMemoryError: CUDA out of memory" in oom


def test_slurm_labels_are_padded_task_ids(tmp_path: Path) -> None:
    write_job(tmp_path, 128, "slurm", "lagging", culprit=7)
    lines = (tmp_path / "slurm-771204.out").read_text().splitlines()
    assert all(re.match(r"^[ \d]{3}: ", line) for line in lines)
    assert any(line.startswith("  7: [rank7]:") and "Last enqueued NCCL work: 4811" in line for line in lines)
    assert sum("Watchdog caught collective operation timeout" in line for line in lines) == 127


def test_xid_lines_go_to_the_faulty_hosts_kernel_log(tmp_path: Path) -> None:
    write_job(tmp_path, 32, "interleaved", "xid", culprit=21)
    kernel = tmp_path / f"kernel-{host_of(21)}.log"
    text = kernel.read_text()
    assert re.search(rf" {host_of(21)} kernel: NVRM: Xid \(PCI:0000:[0-9a-f]{{2}}:00\): 79, pid=\d+", text)
    assert [p.name for p in tmp_path.glob("kernel-*.log")] == [kernel.name]


def test_mismatch_rank_reports_a_different_op_at_the_same_seqnum(tmp_path: Path) -> None:
    write_job(tmp_path, 8, "interleaved", "mismatch", culprit=2)
    text = (tmp_path / "train.log").read_text()
    assert "[rank2]:[E1129" in text
    assert re.search(r"\[Rank 2\] Watchdog caught .*SeqNum=4812, OpType=BROADCAST, NumelIn=1,", text)
    assert len(re.findall(r"SeqNum=4812, OpType=ALLREDUCE", text)) == 7
