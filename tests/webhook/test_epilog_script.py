"""deploy/slurm/ncclbot-epilog.py as slurmctld runs it (a subprocess with Slurm's environment): it
reports failed jobs only, returns at once whatever the bot does, keeps events spooled while the bot is
down and delivers them on the next run, and sets aside events the bot refuses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.webhook.harness import SECRET, Webhook, running_webhook, settings_for
from tests.webhook.slurm_epilog import EPILOG

JOBCOMP_FAILED = {
    "JOBID": "4242",
    "JOBNAME": "llama",
    "JOBSTATE": "FAILED",
    "EXITCODE": "1:0",
    "NODES": "gpu-node-[017-018]",
    "USERNAME": "alice",
    "PARTITION": "gpu",
    "WORK_DIR": "/nonexistent/run",
    "STDOUT": "/nonexistent/run/slurm-%j.out",
}


def run_epilog(config: Path, env: dict[str, str], *args: str) -> float:
    """Run the script as slurmctld does (a bare environment); return how long it took."""
    started = time.monotonic()
    subprocess.run(
        [sys.executable, str(EPILOG), *args],
        env={"NCCLBOT_EPILOG_CONFIG": str(config), **env},
        timeout=60,
        check=True,
    )
    return time.monotonic() - started


def write_config(tmp_path: Path, url: str, secret: str = SECRET, **extra: str) -> tuple[Path, Path]:
    spool = tmp_path / "spool"
    values = {
        "NCCLBOT_WEBHOOK_URL": url,
        "NCCLBOT_WEBHOOK_SECRET": secret,
        "NCCLBOT_EPILOG_SPOOL": str(spool),
        "NCCLBOT_BIN": "none",
        "NCCLBOT_EPILOG_CLUSTER": "prod-a",
        "NCCLBOT_EPILOG_POST_TIMEOUT": "2",
        **extra,
    }
    config = tmp_path / "epilog.conf"
    config.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return config, spool


def spooled(spool: Path) -> list[Path]:
    return sorted(spool.glob("*.json")) if spool.is_dir() else []


def wait_until(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"still not true after {timeout} s")


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[Webhook]:
    with running_webhook(settings_for(f"sqlite:///{tmp_path / 'bot.db'}")) as running:
        yield running


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung bot)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def test_a_failed_job_from_jobcomp_is_posted_and_leaves_nothing_spooled(
    tmp_path: Path, webhook: Webhook
) -> None:
    config, spool = write_config(tmp_path, webhook.url + "/webhooks/job-failed")
    run_epilog(config, JOBCOMP_FAILED)
    wait_until(lambda: webhook.outlet.top_level())
    [post] = webhook.outlet.top_level()
    assert post.message.text.startswith("FAILED (exit 1): job 4242 (llama) on prod-a")
    wait_until(lambda: not spooled(spool))


@pytest.mark.parametrize("state", ["COMPLETED", "CANCELLED"])
def test_jobs_that_did_not_fail_are_not_reported(tmp_path: Path, state: str) -> None:
    config, spool = write_config(tmp_path, "http://127.0.0.1:9/webhooks/job-failed")
    run_epilog(config, {**JOBCOMP_FAILED, "JOBSTATE": state})
    assert spooled(spool) == []


def test_the_epilog_returns_at_once_while_the_bot_hangs_and_keeps_the_event(
    tmp_path: Path, silent_port: int
) -> None:
    config, spool = write_config(tmp_path, f"http://127.0.0.1:{silent_port}/webhooks/job-failed")
    assert run_epilog(config, JOBCOMP_FAILED) < 2.0
    [item] = spooled(spool)
    wait_until(lambda: json.loads(item.read_text()).get("tries") == 1)  # the deliverer gave up for now
    assert "timed out" in json.loads(item.read_text())["last_error"]


def test_events_spooled_while_the_bot_was_down_are_delivered_by_the_next_flush(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    config, spool = write_config(tmp_path, f"http://127.0.0.1:{closed_port}/webhooks/job-failed")
    for job in ("5001", "5002"):
        run_epilog(config, {**JOBCOMP_FAILED, "JOBID": job})
    # The deliverer stops at the first event the bot does not take: the oldest was tried, both wait.
    wait_until(lambda: len(spooled(spool)) == 2 and json.loads(spooled(spool)[0].read_text()).get("tries"))
    with running_webhook(settings_for(f"sqlite:///{tmp_path / 'bot.db'}")) as webhook:
        write_config(tmp_path, webhook.url + "/webhooks/job-failed")
        run_epilog(config, {}, "--flush")
        assert spooled(spool) == []
        wait_until(lambda: len(webhook.outlet.top_level()) == 2)
        assert sorted(p.message.text.split()[4] for p in webhook.outlet.top_level()) == ["5001", "5002"]


def test_an_event_the_bot_refuses_is_set_aside_with_the_reason(tmp_path: Path, webhook: Webhook) -> None:
    config, spool = write_config(tmp_path, webhook.url + "/webhooks/job-failed", secret="wrong")
    run_epilog(config, JOBCOMP_FAILED)
    wait_until(lambda: list((spool / "rejected").glob("*.json")))
    [rejected] = list((spool / "rejected").glob("*.json"))
    assert json.loads(rejected.read_text())["error"].startswith("401 ")
    assert spooled(spool) == [] and webhook.outlet.posted == []


def test_an_array_task_is_reported_under_the_id_users_know(tmp_path: Path, webhook: Webhook) -> None:
    config, _ = write_config(tmp_path, webhook.url + "/webhooks/job-failed")
    run_epilog(config, {**JOBCOMP_FAILED, "JOBID": "4250", "ARRAYJOBID": "4242", "ARRAYTASKID": "7"})
    wait_until(lambda: webhook.outlet.top_level())
    assert " job 4242_7 (llama) " in webhook.outlet.top_level()[0].message.text


def test_without_a_url_it_reports_nothing_and_still_succeeds(tmp_path: Path) -> None:
    config = tmp_path / "empty.conf"
    config.write_text("# not configured yet\n")
    run_epilog(config, JOBCOMP_FAILED)
    assert not (tmp_path / "spool").exists()
    assert os.listdir(tmp_path) == ["empty.conf"]


EPILOG_ENV = {
    "SLURM_JOB_ID": "4300",
    "SLURM_JOB_NAME": "llama",
    "SLURM_JOB_USER": "alice",
    "SLURM_JOB_PARTITION": "gpu",
    "SLURM_JOB_NODELIST": "gpu-node-[017-018]",
    "SLURM_JOB_WORK_DIR": "/nonexistent/run",
    "SLURM_JOB_STDOUT": "/nonexistent/run/slurm-%j.out",
    "SLURM_JOB_RESTART_COUNT": "0",
    "SLURM_CLUSTER_NAME": "prod-a",
    "SLURM_SCRIPT_CONTEXT": "epilog_slurmctld",
}


def completing(reason: str, exit_code: str) -> str:
    """`scontrol show job` while the epilog runs (recorded on 22.05: the final state is not set yet)."""
    return (
        "JobId=4300 JobName=llama\n   UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A\n"
        f"   JobState=COMPLETING Reason={reason} Dependency=(null)\n"
        f"   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode={exit_code}\n"
        "   NodeList=(null)\n   BatchHost=gpu-node-017\n   WorkDir=/nonexistent/run\n"
        "   StdOut=/nonexistent/run/slurm-4300.out\n"
    )


@pytest.mark.parametrize(
    ("reason", "exit_code", "code2", "reported"),
    [
        ("NonZeroExitCode", "1:0", "1:0", "FAILED"),
        ("TimeLimit", "0:0", "0:0", "TIMEOUT"),  # the epilog runs before the kill: only Reason says it
        ("NodeDown", "0:0", "0:0", "NODE_FAIL"),
        ("None", "0:0", "0:0", None),
    ],
)
def test_the_epilog_tells_failures_from_the_reason_while_the_job_is_completing(
    tmp_path: Path, reason: str, exit_code: str, code2: str, reported: str | None
) -> None:
    from tests.jobs.fake_slurm import fake_slurm

    slurm = fake_slurm(tmp_path)
    slurm.answer("scontrol", "show job 4300", completing(reason, exit_code))
    config, spool = write_config(
        tmp_path, "http://127.0.0.1:9/webhooks/job-failed", SCONTROL=str(slurm.bin_dir / "scontrol")
    )
    run_epilog(config, {**EPILOG_ENV, "SLURM_JOB_EXIT_CODE2": code2})
    events = [json.loads(p.read_text())["event"] for p in spooled(spool)]
    if reported is None:
        assert events == []
        return
    [event] = events
    assert (event["state"], event["job_id"], event["node_list"], event["cluster"]) == (
        reported,
        "4300",
        "gpu-node-[017-018]",
        "prod-a",
    )
    assert event["std_out"] == "/nonexistent/run/slurm-4300.out"  # scontrol's, expanded


def test_the_shipped_example_config_reads_as_documented(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("ncclbot_epilog", EPILOG)
    assert spec is not None and spec.loader is not None
    epilog = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(epilog)
    secret = tmp_path / "webhook-secret"
    secret.write_text("s3cret\n")
    example = (
        (EPILOG.parent / "epilog.conf.example")
        .read_text()
        .replace("/etc/ncclbot/webhook-secret", str(secret))
    )
    (tmp_path / "epilog.conf").write_text(example)
    monkeypatch.setenv("NCCLBOT_EPILOG_CONFIG", str(tmp_path / "epilog.conf"))
    monkeypatch.delenv("PATH")
    values = epilog.settings()
    assert values["NCCLBOT_WEBHOOK_URL"] == "http://ncclbot.example:3000/webhooks/job-failed"
    assert values["NCCLBOT_WEBHOOK_SECRET"] == "s3cret"
    assert values["NCCLBOT_EPILOG_SPOOL"] == "/var/spool/ncclbot-epilog"
    assert "NCCLBOT_BIN" not in values  # commented out
    assert os.environ["PATH"] == "/usr/local/bin:/usr/bin:/bin"  # handed to scontrol and ncclbot
