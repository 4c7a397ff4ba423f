"""The slurm job source: scontrol while the job is known, sacct (slurmdbd) or sacct -c (jobcomp) after,
log files found from the recorded patterns. Slurm's answers come from recorded output (tests/jobs/
fake_slurm.py); the real cluster is exercised in test_slurm_cluster.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.jobs.model import JobError, JobNotFound, JobRef
from bot.jobs.slurm.commands import SlurmCommands
from bot.jobs.slurm.source import SlurmSource
from tests.jobs.fake_slurm import FakeSlurm, fake_slurm
from tests.jobs.test_slurm_text import recorded

INVALID = "slurm_load_jobs error: Invalid job id specified\n"


@pytest.fixture
def slurm(tmp_path: Path) -> FakeSlurm:
    return fake_slurm(tmp_path)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "my runs"
    folder.mkdir()
    return folder


def source(slurm: FakeSlurm) -> SlurmSource:
    return SlurmSource(commands=SlurmCommands(bin_dir=slurm.bin_dir, timeout=20))


def test_a_known_job_gives_its_state_nodes_and_the_log_its_pattern_names(
    slurm: FakeSlurm, workdir: Path
) -> None:
    # %N in StdOut: the batch node's own host name, which need not be Slurm's node name.
    (workdir / "out-fail job-3-vm-root.log").write_text("[rank0]: boom\n")
    slurm.answer("scontrol", "show job 3", recorded("scontrol-22.05-job-failed.txt", str(workdir)))
    fetched = source(slurm).fetch(JobRef("3", cluster="c1"), workdir)
    info = fetched.info
    assert (info.state, info.reason, info.exit_code, info.name, info.user) == (
        "FAILED",
        "NonZeroExitCode",
        "3:0",
        "fail job",
        "root",
    )
    assert info.nodes == ("localhost",)
    assert fetched.paths == (workdir / "out-fail job-3-vm-root.log",)


def test_an_array_job_gives_the_per_task_files_of_every_failed_task(slurm: FakeSlurm, workdir: Path) -> None:
    for name in ("arr-4_0-0.out", "arr-4_1-0.out", "arr-4_1-1.out"):
        (workdir / name).write_text("x\n")
    slurm.answer(
        "scontrol", "show job 4_1", recorded("scontrol-22.05-job-array.txt", str(workdir)).split("\n\n")[0]
    )
    slurm.answer("scontrol", "show job 4", recorded("scontrol-22.05-job-array.txt", str(workdir)))
    whole = source(slurm).lookup(JobRef("4"))
    assert [Path(p).name for p in whole.log_paths] == ["arr-4_1-0.out", "arr-4_1-1.out", "arr-4_0-0.out"]
    task = source(slurm).lookup(JobRef("4_1"))
    assert [Path(p).name for p in task.log_paths] == ["arr-4_1-0.out", "arr-4_1-1.out"]


def test_a_job_slurmctld_forgot_is_read_from_jobcomp_when_accounting_is_disabled(
    slurm: FakeSlurm, workdir: Path
) -> None:
    (workdir / "slurm-12.out").write_text("[rank0]: boom\n")
    slurm.answer("scontrol", "show job 12", stderr=INVALID, status=1)
    slurm.answer("sacct", "--version", "slurm-wlm 22.05.8\n")
    slurm.answer(
        "sacct", "--completion", f"12|12|train|alice(1001)|FAILED|1:0|gpu-node-[017-018]|{workdir}\n"
    )
    slurm.answer("sacct", "--jobs=12", stderr="Slurm accounting storage is disabled", status=1)
    info = source(slurm).lookup(JobRef("12"))
    assert (info.state, info.user, info.exit_code) == ("FAILED", "alice", "1:0")
    assert info.nodes == ("gpu-node-017", "gpu-node-018")
    assert info.log_paths == (str(workdir / "slurm-12.out"),)
    assert any("assumed Slurm's default slurm-%j.out" in note for note in info.notes)


def test_slurm_24_sacct_names_the_expanded_stdout_and_stderr(slurm: FakeSlurm, workdir: Path) -> None:
    (workdir / "train-77.out").write_text("out\n")
    (workdir / "train-77.e").write_text("err\n")
    slurm.answer("scontrol", "show job 77", stderr=INVALID, status=1)
    slurm.answer("sacct", "--version", "slurm 24.05.4\n")
    row = f"77|77|train|alice|TIMEOUT|0:15|gpu-node-017|{workdir}|{workdir}/train-77.out|{workdir}/train-77.e"
    slurm.answer("sacct", "--jobs=77", row + "\n")
    info = source(slurm).lookup(JobRef("77"))
    assert info.state == "TIMEOUT"
    assert [Path(p).name for p in info.log_paths] == ["train-77.out", "train-77.e"]
    sacct_call = next(call for call in slurm.calls() if any(a.startswith("--jobs=") for a in call))
    assert "--expand-patterns" in sacct_call
    assert "--format=JobID,JobIDRaw,JobName,User,State,ExitCode,NodeList,WorkDir,StdOut,StdErr" in sacct_call


def test_with_slurmctld_down_accounting_still_answers(slurm: FakeSlurm, workdir: Path) -> None:
    (workdir / "slurm-12.out").write_text("[rank0]: boom\n")
    down = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    slurm.answer("scontrol", "show job 12", stderr=down, status=1)
    slurm.answer("sacct", "--version", "slurm 23.11.4\n")
    slurm.answer("sacct", "--jobs=12", f"12|12|train|alice|FAILED|1:0|gpu-node-017|{workdir}\n")
    assert source(slurm).lookup(JobRef("12")).log_paths == (str(workdir / "slurm-12.out"),)


def test_with_slurmctld_and_slurmdbd_down_both_reasons_are_given(slurm: FakeSlurm) -> None:
    slurm.answer("scontrol", "show job 12", stderr="Unable to contact slurm controller\n", status=1)
    slurm.answer("sacct", "--version", "slurm 23.11.4\n")
    slurm.answer(
        "sacct",
        "--jobs=12",
        stderr="sacct: error: Problem talking to the database: Connection refused",
        status=1,
    )
    with pytest.raises(
        JobError, match=r"Unable to contact slurm controller; and sacct --jobs=12: .*Connection refused"
    ):
        source(slurm).lookup(JobRef("12"))


def test_a_job_nobody_knows_is_not_found(slurm: FakeSlurm) -> None:
    slurm.answer("scontrol", "show job 99", stderr=INVALID, status=1)
    slurm.answer("sacct", "--version", "slurm-wlm 22.05.8\n")
    slurm.answer("sacct", "--jobs=99", "")
    with pytest.raises(JobNotFound, match="knows no job 99"):
        source(slurm).lookup(JobRef("99"))


def test_a_known_job_without_readable_logs_says_where_it_looked(slurm: FakeSlurm, workdir: Path) -> None:
    slurm.answer("scontrol", "show job 3", recorded("scontrol-22.05-job-failed.txt", str(workdir)))
    with pytest.raises(JobError, match=r"no log file to read: no file .*out-fail job-3-localhost-root.log"):
        source(slurm).fetch(JobRef("3"), workdir)


@pytest.mark.parametrize("job_id", ["12; rm -rf /", "-1", "12 13", "../12", "", "1_2_3"])
def test_hostile_job_ids_never_reach_a_command(slurm: FakeSlurm, job_id: str) -> None:
    slurm.answer("scontrol", "show job", "")
    with pytest.raises(JobError, match="invalid Slurm job id"):
        source(slurm).lookup(JobRef(job_id))
    assert slurm.calls() == []


def test_missing_slurm_tools_are_one_clear_line(tmp_path: Path) -> None:
    missing = SlurmSource(commands=SlurmCommands(bin_dir=tmp_path / "nowhere"))
    with pytest.raises(JobError, match="Slurm client tools are not installed here"):
        missing.lookup(JobRef("3"))
