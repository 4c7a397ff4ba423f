"""The recovery actions' service: who may act, what is audited, dry run; the same service behind the
CLI (`ncclbot node drain|resume`, `ncclbot job requeue`) and the Slack buttons. Slurm's answers are
recorded ones here (tests/jobs/fake_slurm.py); the real cluster is in tests/jobs/test_slurm_cluster.py
and tests/webhook/test_slurm_epilog.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.jobs.model import ActionError, JobError
from bot.services.cluster_actions import ActionDenied, Actor, ClusterActionService
from bot.settings import Settings
from bot.store import Store
from tests.cli.helpers import run_cli
from tests.jobs.fake_slurm import FakeSlurm, fake_slurm
from tests.store.diagnoses import make_diagnosis

ADMIN = Actor(id="UADMIN", via="slack")
STRANGER = Actor(id="USOMEONE", via="slack")
IN_GROUP = Actor(id="UOTHER", via="slack", groups=frozenset({"SONCALL"}))


@pytest.fixture
def slurm(tmp_path: Path) -> FakeSlurm:
    fake = fake_slurm(tmp_path)
    fake.answer(
        "scontrol", "show node", "NodeName=gpu-node-017 Arch=x86_64\n   State=IDLE+DRAIN ThreadsPerCore=1\n"
    )
    fake.answer("scontrol", "update NodeName=", "")
    fake.answer("scontrol", "requeuehold", "")
    fake.answer("scontrol", "release", "")
    fake.answer("scontrol", "update JobId=", "")
    return fake


def service(store: Store, slurm: FakeSlurm, **fields: object) -> ClusterActionService:
    settings = Settings(
        slurm_bin_dir=slurm.bin_dir, admin_users=["UADMIN"], admin_groups=["SONCALL"], **fields
    )
    return ClusterActionService(settings=settings, store=store)


def test_admins_and_members_of_admin_groups_may_drain_others_are_refused_and_audited(
    store: Store, slurm: FakeSlurm
) -> None:
    actions = service(store, slurm)
    actions.drain(ADMIN, "gpu-node-017", reason="flapping link")
    actions.drain(IN_GROUP, "gpu-node-018", reason="flapping link")
    with pytest.raises(ActionDenied, match="USOMEONE may not node drain"):
        actions.drain(STRANGER, "gpu-node-019", reason="x")
    drained = [call for call in slurm.calls() if "NodeName=gpu-node-019" in call or "gpu-node-019" in call]
    assert drained == []
    audit = [
        (e.actor, e.detail["target"], e.detail["outcome"]) for e in store.audit_entries(action="node-drain")
    ]
    assert audit == [
        ("USOMEONE", "gpu-node-019", "denied"),
        ("UOTHER", "gpu-node-018", "done"),
        ("UADMIN", "gpu-node-017", "done"),
    ]


def test_a_drain_for_an_incident_names_it_and_its_class_in_the_reason(store: Store, slurm: FakeSlurm) -> None:
    record = store.record_diagnosis(make_diagnosis("network/ib-rdma"), input_digest="d1")
    service(store, slurm).drain(ADMIN, "gpu-node-017", incident_id=record.id)
    update = next(call for call in slurm.calls() if call[:1] == ["update"])
    assert update == [
        "update",
        "NodeName=gpu-node-017",
        "State=DRAIN",
        f"Reason=ncclbot #{record.id}: network/ib-rdma",
    ]
    [entry] = store.audit_entries(incident_id=record.id, action="node-drain")
    assert entry.detail["steps"] == [
        f"{slurm.bin_dir}/scontrol update NodeName=gpu-node-017 State=DRAIN "
        f"'Reason=ncclbot #{record.id}: network/ib-rdma'"
    ]


def test_dry_run_runs_nothing_and_is_audited_as_such(store: Store, slurm: FakeSlurm) -> None:
    outcome = service(store, slurm, cluster_actions_dry_run=True).requeue(
        ADMIN, "4242", exclude=["gpu-node-017"]
    )
    assert outcome.dry_run and slurm.calls() == []
    assert [s.rsplit("/", 1)[-1] for s in outcome.steps] == [
        "scontrol requeuehold 4242",
        "scontrol update JobId=4242 ExcNodeList=gpu-node-017",
        "scontrol release 4242",
    ]
    [entry] = store.audit_entries(action="job-requeue")
    assert entry.detail["outcome"] == "dry-run"


def test_a_refused_or_invalid_action_is_audited_as_failed(store: Store, tmp_path: Path) -> None:
    (tmp_path / "refusing").mkdir()
    slurm = fake_slurm(tmp_path / "refusing")
    slurm.answer("scontrol", "requeuehold 99", stderr="Invalid job id specified\n", status=1)
    actions = service(store, slurm)
    with pytest.raises(ActionError, match="Invalid job id specified"):
        actions.requeue(ADMIN, "99", exclude=[])
    with pytest.raises(JobError, match="invalid node name"):
        actions.drain(ADMIN, "gpu-node-017;reboot", reason="x")
    outcomes = [(e.action, e.detail["outcome"]) for e in store.audit_entries()]
    assert outcomes == [("node-drain", "failed"), ("job-requeue", "failed")]


def test_the_cli_drains_resumes_and_requeues_through_the_same_service(
    tmp_path: Path, slurm: FakeSlurm
) -> None:
    env = {
        "NCCLBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "NCCLBOT_SLURM_BIN_DIR": str(slurm.bin_dir),
    }
    drained = run_cli("node", "drain", "gpu-node-017", "--reason", "bad link", env=env)
    assert drained.returncode == 0, drained.stderr
    assert b"ran: " in drained.stdout and b"'Reason=ncclbot: bad link'" in drained.stdout
    resumed = run_cli("node", "resume", "gpu-node-017", "--json", env=env)
    assert json.loads(resumed.stdout)["steps"][0].endswith(
        "scontrol update NodeName=gpu-node-017 State=RESUME"
    )
    dry = run_cli("job", "requeue", "4242", "--exclude", "gpu-node-017", "--dry-run", env=env)
    assert b"would run: " in dry.stdout
    refused = run_cli("node", "drain", "--reason", "x", "--", "-rf", env=env)
    assert (
        refused.returncode == 2
        and refused.stderr
        == b"ncclbot: invalid node name '-rf': expected an RFC 1123 host name or an IP address\n"
    )
    with Store.open(env["NCCLBOT_DATABASE_URL"]) as store:
        assert [e.action for e in store.audit_entries()] == [
            "node-drain",
            "job-requeue",
            "node-resume",
            "node-drain",
        ]
        assert all(e.actor.startswith("cli:") for e in store.audit_entries())


def test_an_actor_the_front_end_already_admitted_may_act_and_the_audit_says_who_admitted_them(
    store: Store, slurm: FakeSlurm
) -> None:
    group_member = Actor(id="UGROUPIE", via="slack", admitted_by="slack admin policy (user groups)")
    service(store, slurm).drain(group_member, "gpu-node-017", reason="x")
    [entry] = store.audit_entries(action="node-drain")
    assert (entry.actor, entry.detail["admitted_by"], entry.detail["outcome"]) == (
        "UGROUPIE",
        "slack admin policy (user groups)",
        "done",
    )


@pytest.mark.parametrize(
    ("settings", "configured"),
    [
        ({}, True),  # the default job source is slurm, and its actions follow it
        ({"cluster_actions": {"*": "none"}}, False),
        ({"job_sources": {"*": "directory"}, "job_log_template": "/logs/{job_id}"}, False),
        ({"job_sources": {"*": "directory", "gpu": "slurm"}, "job_log_template": "/logs/{job_id}"}, True),
        ({"cluster_actions": {"*": "none", "k8s-east": "kubernetes"}}, True),
    ],
)
def test_the_chat_front_end_is_told_whether_any_cluster_has_actions(
    settings: dict[str, object], configured: bool
) -> None:
    from bot.services.hooks import cluster_actions

    assert (cluster_actions(Settings(**settings)) is not None) is configured
