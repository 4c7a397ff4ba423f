"""`/nccl diagnose <job-id> [cluster]` once job sources exist: the job's logs are fetched through the
JobSources hook (bot.jobs provides the real ones; here a directory of logs stands in), diagnosed, and
the incident message names the job; an unknown job is told in the placeholder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.services.hooks import JobLogs, JobNotFound
from bot.services.outlet import MessageRef
from bot.settings import Settings
from bot.slack.app import build_deps
from bot.slack.deps import SlackDeps
from bot.slack.work import DiagnoseTask
from bot.store import Store
from tests.fakes.slack_api import FakeSlack, blocks_text
from tests.scenario_tests.logs import next_culprit, oom_log, xid_logs


class DirectoryJobs:
    """Job sources over a folder per job: `<root>/<cluster>/<job_id>/`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def fetch(self, job_id: str, cluster: str | None, *, key: str = "") -> JobLogs:
        folder = self.root / (cluster or "default") / job_id
        if not folder.is_dir():
            raise JobNotFound(f"job {job_id} is unknown on {cluster or 'the default cluster'}")
        return JobLogs(job_id=job_id, paths=(str(folder),), cluster=cluster, name=f"pretrain-{job_id}")


@pytest.fixture
def deps(tmp_path: Path) -> Iterator[tuple[SlackDeps, FakeSlack]]:
    with FakeSlack() as slack:
        settings = Settings(
            slack_bot_token=slack.bot_token,
            slack_api_url=slack.api_url,
            database_url=f"sqlite:///{tmp_path / 'store.sqlite3'}",
            spool_dir=tmp_path / "spool",
        )
        with Store.open(settings.database_url) as store:
            built = build_deps(settings, store)
            built.jobs = DirectoryJobs(tmp_path / "jobs")
            yield built, slack


def test_job_logs_are_fetched_diagnosed_and_the_job_named(
    deps: tuple[SlackDeps, FakeSlack], tmp_path: Path
) -> None:
    slack_deps, slack = deps
    rank, host = next_culprit()
    folder = tmp_path / "jobs" / "east" / "771204"
    folder.mkdir(parents=True)
    (folder / "train.log").write_bytes(oom_log(rank))
    payload = {"job_id": "771204", "cluster": "east", "channel": "C1", "user": "U1"}
    slack_deps.handlers()["slack.job"](_item(payload))
    slack_deps.handlers()["slack.job"](_item(payload))  # a retry after a crash posts nothing new
    [message] = slack.top_level("C1")  # the task's placeholder, edited into the incident message
    shown = blocks_text(message["blocks"])
    assert "cuda/oom" in shown and host in shown
    assert "`pretrain-771204` on `east`" in shown
    assert slack_deps.store.message_for_job("771204", "east") == ("C1", message["ts"])
    # The job's logs are the incident's bundle (kept where they are): a re-run reads them.
    [incident] = slack_deps.store.incidents()
    bundle = slack_deps.store.bundle(incident.id)
    assert [(f.path, f.external) for f in bundle.files] == [(str(folder), True)]
    assert incident.occurrences == 1


def test_unknown_job_is_told_in_the_placeholder(deps: tuple[SlackDeps, FakeSlack]) -> None:
    slack_deps, slack = deps
    payload = {"job_id": "404", "cluster": None, "channel": "C1", "user": "U1"}
    slack_deps.handlers()["slack.job"](_item(payload))
    [message] = slack.top_level("C1")
    assert "job 404 is unknown" in blocks_text(message["blocks"])


def _item(payload: dict) -> object:
    from datetime import UTC, datetime

    from bot.store.queue import QueuedItem

    return QueuedItem(
        id=1,
        kind="slack.job",
        key="k",
        group_key=None,
        payload=payload,
        status="running",
        attempts=1,
        created_at=datetime.now(UTC),
        claimed_by="test",
        last_error=None,
        result=None,
    )


def test_a_thread_re_run_of_a_job_incident_reads_the_job_logs_too(
    deps: tuple[SlackDeps, FakeSlack], tmp_path: Path
) -> None:
    slack_deps, slack = deps
    rank, host = next_culprit()
    logs = xid_logs(rank)
    folder = tmp_path / "jobs" / "east" / "771300"
    folder.mkdir(parents=True)
    (folder / "train.log").write_bytes(logs["train.log"])
    slack_deps.handlers()["slack.job"](
        _item({"job_id": "771300", "cluster": "east", "channel": "C1", "user": "U1"})
    )
    [incident] = slack_deps.store.incidents()
    [message] = slack.top_level("C1")
    # The node's kernel log, pasted later in the incident's thread.
    kernel = next(data for name, data in logs.items() if name.startswith("kernel"))
    task = DiagnoseTask(
        channel="C1",
        placeholder=None,
        placeholder_top_level=False,
        thread=MessageRef("C1", message["ts"]),
        pasted=kernel.decode(),
        incident_id=incident.id,
        edit=MessageRef("C1", message["ts"]),
    )
    slack_deps.handlers()["slack.diagnose"](_item(task.to_payload()))
    [summary] = slack_deps.store.incidents()
    assert (summary.class_id, summary.occurrences) == ("hardware/gpu-xid", 1)
    document = slack_deps.store.incident_detail(summary.id).document
    sources = {e["source"] for d in document["diagnoses"] for e in d["evidence"]}
    assert any(source.startswith("train.log") or "/train.log" in source for source in sources), sources
    assert host in blocks_text(slack.top_level("C1")[0]["blocks"])
