"""Queued Slack tasks survive a trip through JSON (the durable queue stores them so), and progress edits
are throttled to Slack's pace."""

from __future__ import annotations

import json

from bot.services.hooks import JobLogs
from bot.services.outlet import MessageRef
from bot.slack.files import SharedFile
from bot.slack.work import DiagnoseTask, Throttle


def test_a_task_comes_back_from_its_json_payload_unchanged() -> None:
    task = DiagnoseTask(
        channel="C1",
        placeholder=MessageRef("C1", "1.2"),
        placeholder_top_level=False,
        thread=MessageRef("C1", "1.1"),
        user="U1",
        files=(SharedFile("F1", "rank0.log", 10),),
        pasted="a\nb\nc",
        job=JobLogs(job_id="7", paths=("/logs/7",), cluster="east", name="pretrain", nodes=("n1",)),
        incident_id=4,
        edit=MessageRef("C1", "0.9"),
    )
    assert DiagnoseTask.from_payload(json.loads(json.dumps(task.to_payload()))) == task
    bare = DiagnoseTask(channel="C1", placeholder=None, placeholder_top_level=True)
    assert DiagnoseTask.from_payload(json.loads(json.dumps(bare.to_payload()))) == bare


def test_progress_is_passed_on_at_most_once_per_interval() -> None:
    seen: list[int] = []
    throttle = Throttle(seen.append, interval=3600)
    for done in range(1000):
        throttle(done)
    assert seen == []  # within the first interval nothing is edited
    eager = Throttle(seen.append, interval=0.0)
    eager(5)
    assert seen == [5]


def test_a_failing_progress_edit_does_not_stop_the_diagnosis() -> None:
    def broken(_done: int) -> None:
        raise OSError("Slack is down")

    Throttle(broken, interval=0.0)(1)  # no exception
