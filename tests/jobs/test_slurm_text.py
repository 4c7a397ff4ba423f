"""scontrol's text output parses into the right fields, values with spaces included (Slurm 22.05
output recorded on the test cluster; paths re-rooted into a folder with a space in its name)."""

from __future__ import annotations

from pathlib import Path

from bot.jobs.slurm import text

RECORDED = Path(__file__).parent / "recorded"


def recorded(name: str, workdir: str = "/work/my runs") -> str:
    return (RECORDED / name).read_text().replace("{workdir}", workdir)


def test_job_record_keeps_values_with_spaces_whole() -> None:
    [record] = text.parse_records(recorded("scontrol-22.05-job-failed.txt"))
    assert record["JobName"] == "fail job"
    assert record["WorkDir"] == "/work/my runs"
    assert record["StdOut"] == "/work/my runs/out-fail job-3-%N-root.log"
    assert record["Command"] == "/work/my runs/fail.sh"
    assert (record["JobState"], record["Reason"], record["ExitCode"]) == ("FAILED", "NonZeroExitCode", "3:0")
    assert record["ReqB:S:C:T"] == "0:0:*:*"
    assert record["TRES"] == "cpu=1,node=1,billing=1"


def test_array_output_gives_one_record_per_task() -> None:
    records = text.parse_records(recorded("scontrol-22.05-job-array.txt"))
    assert [(r["JobId"], r["ArrayJobId"], r["ArrayTaskId"]) for r in records] == [
        ("4", "4", "1"),
        ("5", "4", "0"),
    ]


def test_node_reason_with_spaces_and_equals_signs_is_one_value() -> None:
    [record] = text.parse_records(recorded("scontrol-22.05-node-drained.txt"), text.NODE_FREE_TEXT)
    assert record["State"] == "IDLE+DRAIN"
    assert record["Reason"].startswith("ncclbot #12: network-ib-rdma (x=1 y) [root@")
    assert record["OS"].startswith("Linux ")


def test_parsable_rows_split_on_pipes_and_keep_extra_pipes_in_the_last_field() -> None:
    rows = text.parse_parsable("12|FAILED|/a|b\n\n13|TIMEOUT|/c\n", ["JobID", "State", "WorkDir"])
    assert rows == [
        {"JobID": "12", "State": "FAILED", "WorkDir": "/a|b"},
        {"JobID": "13", "State": "TIMEOUT", "WorkDir": "/c"},
    ]


def test_slurm_nothing_values_and_user_ids() -> None:
    assert [text.null(v) for v in ("(null)", "None", "N/A", "", "x")] == [None, None, None, None, "x"]
    assert text.user_name("alice(1001)") == "alice"
    assert text.base_state("CANCELLED by 1001") == "CANCELLED"
