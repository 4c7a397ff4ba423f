"""The kubernetes job source and cluster actions, through the official client, against a fake API
server over HTTP (tests/jobs/fake_kube.py) serving objects shaped like the API server's (recorded/
k8s-*.json). No Kubernetes cluster can run on these machines: this is the one mocked part."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from bot.jobs.k8s.actions import REASON_ANNOTATION, TAINT_KEY, KubernetesActions
from bot.jobs.k8s.source import KubernetesSource
from bot.jobs.model import ActionError, JobError, JobNotFound, JobRef
from bot.services.hooks import ConfiguredJobSources
from bot.settings import Settings
from tests.jobs.fake_kube import FakeKube, KubeState, fake_kube

RECORDED = Path(__file__).parent / "recorded"
OOM = "[rank9]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which 2.1 GiB is free.\n"  # noqa: E501
TIMEOUT = (
    "[rank0]:[E1130 03:11:40.112000 41 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632] [Rank 0] "
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4812, OpType=ALLREDUCE, NumelIn=1048576, "
    "NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
)


def recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text())


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    pods = recorded("k8s-pods.json")
    state = KubeState(
        pods={"research": pods["pytorchjob"] + pods["jobset"]},
        logs={
            ("bert-large-master-0", "pytorch", False): TIMEOUT,
            ("bert-large-worker-0", "pytorch", False): TIMEOUT.replace("rank0", "rank8").replace(
                "Rank 0", "Rank 8"
            ),
            ("bert-large-worker-1", "pytorch", True): OOM,
            ("bert-large-worker-1", "pytorch", False): "restarted, waiting for peers\n",
            ("llm-sft-workers-0-0-x7k2p", "node", False): OOM,
        },
        nodes={"gpu-node-018": recorded("k8s-node.json")},
    )
    with fake_kube(state) as running:
        yield running


def settings(kube: FakeKube, tmp_path: Path) -> Settings:
    return Settings(kubernetes_kubeconfig=kube.kubeconfig(tmp_path), kubernetes_namespace="research")


def test_the_failed_pods_of_a_pytorchjob_give_their_logs_the_restarted_one_its_previous_container(
    kube: FakeKube, tmp_path: Path
) -> None:
    source = KubernetesSource.from_settings(settings(kube, tmp_path))
    fetched = source.fetch(JobRef("bert-large", cluster="k8s-east"), tmp_path)
    assert [str(p.relative_to(tmp_path)) for p in fetched.paths] == [
        "gpu-node-017/bert-large-master-0__pytorch.log",
        "gpu-node-017/bert-large-worker-0__pytorch.log",
        "gpu-node-018/bert-large-worker-1__pytorch__previous.log",
    ]
    assert fetched.paths[2].read_text() == OOM
    assert fetched.info.nodes == ("gpu-node-017", "gpu-node-018")
    selectors = [
        parse_qs(urlparse(path).query)["labelSelector"]
        for _, path, _ in kube.state.requests
        if "labelSelector" in path
    ]
    assert selectors == [
        ["training.kubeflow.org/job-name=bert-large"]
    ]  # found by the first label: no JobSet query


def test_a_jobset_is_found_by_its_own_label_in_the_namespace_named_by_the_job_id(
    kube: FakeKube, tmp_path: Path
) -> None:
    source = KubernetesSource.from_settings(Settings(kubernetes_kubeconfig=kube.kubeconfig(tmp_path)))
    fetched = source.fetch(JobRef("research/llm-sft"), tmp_path)
    assert [p.name for p in fetched.paths] == ["llm-sft-workers-0-0-x7k2p__node.log"]
    assert (fetched.info.attempt, fetched.info.exit_code, fetched.info.nodes) == (2, "1", ("gpu-node-021",))


def test_a_jobsets_child_job_as_alerts_name_it_finds_the_same_pods(kube: FakeKube, tmp_path: Path) -> None:
    source = KubernetesSource.from_settings(settings(kube, tmp_path))
    fetched = source.fetch(JobRef("llm-sft-workers-0"), tmp_path)
    assert [p.name for p in fetched.paths] == ["llm-sft-workers-0-0-x7k2p__node.log"]


def test_an_unknown_job_is_not_found_and_a_bad_name_never_reaches_the_api(
    kube: FakeKube, tmp_path: Path
) -> None:
    source = KubernetesSource.from_settings(settings(kube, tmp_path))
    with pytest.raises(JobNotFound, match="no pods of a PyTorchJob, JobSet or Job named nope"):
        source.fetch(JobRef("nope"), tmp_path)
    before = len(kube.state.requests)
    for bad in ("Bad_Name", "x/y/z", "../etc"):
        with pytest.raises(JobError):
            source.fetch(JobRef(bad), tmp_path)
    assert len(kube.state.requests) == before


def test_logs_are_capped_per_container(kube: FakeKube, tmp_path: Path) -> None:
    source = KubernetesSource.from_settings(settings(kube, tmp_path))
    source.max_log_bytes = 20
    fetched = source.fetch(JobRef("bert-large"), tmp_path)
    assert all(p.stat().st_size <= 20 for p in fetched.paths)
    assert any("limitBytes=20" in path for _, path, _ in kube.state.requests)


def test_drain_cordons_and_taints_the_node_keeping_its_other_taints_and_resume_undoes_it(
    kube: FakeKube, tmp_path: Path
) -> None:
    actions = KubernetesActions.from_settings(settings(kube, tmp_path))
    original = copy.deepcopy(kube.state.nodes["gpu-node-018"])
    actions.drain("gpu-node-018", "ncclbot #12: cuda/oom", dry_run=False)
    node = kube.state.nodes["gpu-node-018"]
    assert node["spec"]["unschedulable"] is True
    assert {"key": TAINT_KEY, "value": "incident-12", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert node["metadata"]["annotations"][REASON_ANNOTATION] == "ncclbot #12: cuda/oom"
    actions.resume("gpu-node-018", dry_run=False)
    node = kube.state.nodes["gpu-node-018"]
    assert "unschedulable" not in node["spec"]
    assert node["spec"]["taints"] == original["spec"]["taints"]
    assert REASON_ANNOTATION not in node["metadata"]["annotations"]


def test_dry_run_changes_nothing_and_api_refusals_are_one_line(kube: FakeKube, tmp_path: Path) -> None:
    actions = KubernetesActions.from_settings(settings(kube, tmp_path))
    before = len(kube.state.requests)
    outcome = actions.drain("gpu-node-018", "x", dry_run=True)
    assert outcome.dry_run and len(kube.state.requests) == before
    with pytest.raises(
        ActionError, match='reading node gpu-node-099 failed: 404 Not Found nodes "gpu-node-099" not found'
    ):
        actions.drain("gpu-node-099", "x", dry_run=False)
    with pytest.raises(ActionError, match="requeue is not a Kubernetes action"):
        actions.requeue("bert-large", exclude=["gpu-node-018"], dry_run=False)


def test_logs_fetched_again_for_the_same_request_replace_the_first_fetch(
    kube: FakeKube, tmp_path: Path
) -> None:
    """A request retried after a crash fetches into the folder of its first attempt (emptied first), so
    the crashed attempt leaves nothing behind; another request gets a folder of its own."""
    spool = tmp_path / "spool"
    sources = ConfiguredJobSources(
        Settings(
            job_sources={"*": "kubernetes"},
            kubernetes_kubeconfig=kube.kubeconfig(tmp_path),
            kubernetes_namespace="research",
            spool_dir=spool,
        )
    )
    first = sources.fetch("bert-large", None, key="slack.job:T1")
    (Path(first.fetched_into or "") / "left-by-the-crash.log").write_text("partial\n")
    again = sources.fetch("bert-large", None, key="slack.job:T1")
    assert again.fetched_into == first.fetched_into and again.paths == first.paths
    assert not (Path(again.fetched_into or "") / "left-by-the-crash.log").exists()
    other = sources.fetch("bert-large", None, key="slack.job:T2")
    assert other.fetched_into != first.fetched_into
    assert sorted(p.name for p in spool.iterdir()) == sorted(
        Path(f or "").name for f in (first.fetched_into, other.fetched_into)
    )
