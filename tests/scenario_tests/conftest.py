"""One fake Slack and one `ncclbot serve` per test module (starting a server costs seconds); each test
uses channels of its own, so tests stay independent."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.slack_api import FakeSlack
from tests.scenario_tests.slack_requests import SECRET
from tests.server.helpers import RunningServer, running_server

ADMIN = "UADMIN"
GROUP_ADMIN = "UGROUPIE"
ADMIN_GROUP = "SADMINS"


@dataclass
class SlackApp:
    slack: FakeSlack
    server: RunningServer
    database_url: str
    root: Path
    _channels: Iterator[int]

    @property
    def url(self) -> str:
        return self.server.url

    def channel(self) -> str:
        """A channel id no other test uses."""
        return f"C{next(self._channels):04d}{uuid.uuid4().hex[:6].upper()}"


def server_env(slack: FakeSlack, root: Path, **extra: str) -> dict[str, str]:
    return {
        **slack.env(),
        "SLACK_SIGNING_SECRET": SECRET,
        "NCCLBOT_DATABASE_URL": f"sqlite:///{root / 'store.sqlite3'}",
        "NCCLBOT_SPOOL_DIR": str(root / "spool"),
        "NCCLBOT_ADMIN_USERS": ADMIN,
        "NCCLBOT_ADMIN_GROUPS": ADMIN_GROUP,
        "NCCLBOT_PROBE_VIA": "local",
        "NCCLBOT_PROBE_NPROC": "2",
        "NCCLBOT_PROBE_ITERS": "2",
        "NCCLBOT_PROBE_MAX_BYTES": "65536",
        "NCCLBOT_PROBE_TIMEOUT_S": "120",
        "NCCLBOT_SLACK_PROGRESS_INTERVAL_S": "0.5",
        "NCCLBOT_CLUSTER_ACTIONS": "*=none",  # Drain with Slurm: tests/webhook/test_slurm_epilog.py
        # `/nccl diagnose <job-id> <cluster>` reads job logs from a folder per job (tests/jobs for Slurm).
        "NCCLBOT_JOB_SOURCES": "*=directory",
        "NCCLBOT_JOB_LOG_TEMPLATE": str(root / "job-logs" / "{cluster}" / "{job_id}"),
        **extra,
    }


@pytest.fixture(scope="module")
def slack_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlackApp]:
    root = tmp_path_factory.mktemp("slack-app")
    with FakeSlack() as slack:
        slack.set_usergroup(ADMIN_GROUP, [GROUP_ADMIN])
        with running_server(server_env(slack, root)) as server:
            yield SlackApp(slack, server, f"sqlite:///{root / 'store.sqlite3'}", root, itertools.count(1))


SERVER_LOG_LINES = 80


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test that used the module's server shows that server's last log lines: a CI failure
    ("condition not met within 60 s") then says what the server was doing, not only that it was late."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    app = getattr(item, "funcargs", {}).get("slack_app")
    if report.failed and call.when == "call" and isinstance(app, SlackApp):
        try:
            tail = app.server.log().splitlines()[-SERVER_LOG_LINES:]
        except OSError as error:
            tail = [f"(server log unreadable: {error})"]
        report.sections.append((f"ncclbot serve log (last {SERVER_LOG_LINES} lines)", "\n".join(tail)))
