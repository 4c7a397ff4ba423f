"""`ncclbot diagnose --job-id ID [--cluster C]` without PATHs fetches the job's logs through the job
source configured for the cluster (here the `directory` source); with PATHs it reads those as before."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bot.jobs.directory import DirectorySource, check_template
from bot.jobs.model import JobError, JobNotFound, JobRef
from tests.cli.helpers import EXAMPLE, run_cli


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "logs" / "prod-a" / "4242")
    return tmp_path / "logs"


def env_for(logs: Path, tmp_path: Path) -> dict[str, str]:
    return {
        "NCCLBOT_JOB_SOURCES": "prod-a=directory",
        "NCCLBOT_JOB_LOG_TEMPLATE": f"{logs}/{{cluster}}/{{job_id}}/",
        "NCCLBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
    }


def test_a_job_id_alone_is_diagnosed_from_the_folder_its_template_names(logs: Path, tmp_path: Path) -> None:
    result = run_cli(
        "diagnose", "--job-id", "4242", "--cluster", "prod-a", "--json", env=env_for(logs, tmp_path)
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["diagnoses"][0]["class"] == "cuda/oom"
    assert document["incident"]["occurrences"] == 1


def test_an_unknown_job_or_cluster_is_one_line_and_status_2(logs: Path, tmp_path: Path) -> None:
    env = env_for(logs, tmp_path)
    missing = run_cli("diagnose", "--job-id", "9999", "--cluster", "prod-a", env=env)
    assert (missing.returncode, missing.stderr.decode()) == (
        2,
        f"ncclbot: no logs for job 9999 at {logs}/prod-a/9999\n",
    )
    elsewhere = run_cli("diagnose", "--job-id", "4242", "--cluster", "other", env=env)
    assert elsewhere.returncode == 2 and b"no job source configured for cluster other" in elsewhere.stderr
    nothing = run_cli("diagnose", env=env)
    assert nothing.returncode == 2 and b"give log PATHs, or --job-id" in nothing.stderr


def test_paths_still_mean_paths_when_a_job_id_is_given(logs: Path, tmp_path: Path) -> None:
    result = run_cli(
        "diagnose", str(EXAMPLE), "--job-id", "1", "--no-store", "--json", env=env_for(logs, tmp_path)
    )
    assert result.returncode == 0 and json.loads(result.stdout)["diagnoses"][0]["class"] == "cuda/oom"


@pytest.mark.parametrize("job_id", ["../4242", "a/b", "4242 ", "-x"])
def test_the_directory_source_refuses_ids_that_would_leave_the_template(job_id: str, logs: Path) -> None:
    source = DirectorySource(f"{logs}/{{cluster}}/{{job_id}}/")
    with pytest.raises(JobError, match="invalid job id"):
        source.fetch(JobRef(job_id, "prod-a"), logs)
    with pytest.raises(JobNotFound):
        source.fetch(JobRef("4243", "prod-a"), logs)


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("/logs/{cluster}/", "must contain {job_id}"),
        ("/logs/{user}/{job_id}", "unknown field(s) user"),
        ("/logs/{job_id", "expected .}. before end of string"),
    ],
)
def test_bad_templates_are_refused(template: str, reason: str) -> None:
    with pytest.raises(JobError, match=re.escape(reason) if "(" in reason else reason):
        check_template(template)


def test_an_unknown_job_source_or_action_kind_is_refused_when_the_settings_are_read(tmp_path: Path) -> None:
    result = run_cli("node", "drain", "gpu-node-017", "--dry-run", env={"NCCLBOT_JOB_SOURCES": "a=slrum"})
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "ncclbot: settings: NCCLBOT_JOB_SOURCES: a=slrum: unknown kind; known: directory, kubernetes, slurm\n"
    )
    result = run_cli("diagnose", "--job-id", "1", env={"NCCLBOT_CLUSTER_ACTIONS": "b=k8s"})
    assert result.returncode == 2 and b"b=k8s: unknown kind; known: kubernetes, none, slurm" in result.stderr
