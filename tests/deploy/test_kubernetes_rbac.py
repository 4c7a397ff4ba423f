"""deploy/kubernetes/rbac.yaml allows every Kubernetes API call the code makes (found from the code, see
kubernetes_calls.py), scopes probe Jobs to the bot's namespace, and grants no wildcards."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from probes.launchers import kubernetes as k8s_launcher
from probes.options import ProbeOptions
from tests.deploy.kubernetes_calls import (
    ROOT,
    Call,
    Need,
    calls_in,
    kubectl_needs,
    needs_of_call,
    project_calls,
    recorded_kubectl,
    write_fake_kubectl,
)

RBAC = ROOT / "deploy" / "kubernetes" / "rbac.yaml"


def rules(kind: str) -> list[dict[str, list[str]]]:
    documents = [d for d in yaml.safe_load_all(RBAC.read_text()) if d and d["kind"] == kind]
    return [rule for document in documents for rule in document["rules"]]


def allowed(need: Need, granted: list[dict[str, list[str]]]) -> bool:
    return any(
        need.group in rule["apiGroups"] and need.resource in rule["resources"] and need.verb in rule["verbs"]
        for rule in granted
    )


def python_client_needs() -> dict[Need, list[str]]:
    found: dict[Need, list[str]] = {}
    for call in project_calls():
        for need in needs_of_call(call):
            found.setdefault(need, []).append(call.where)
    return found


def probe_launcher_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> set[Need]:
    """Run the Kubernetes probe launcher against a fake kubectl and map what it ran."""
    log = tmp_path / "kubectl.jsonl"
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(log))
    monkeypatch.setattr(k8s_launcher, "POLL_S", 0.01)
    config = k8s_launcher.KubernetesConfig(namespace="ncclbot", kubectl=str(write_fake_kubectl(tmp_path)))
    k8s_launcher.launch(["gpu-node-07"], ProbeOptions(deadline=5), config)
    runs = recorded_kubectl(log)
    assert [run["argv"][3] for run in runs] == ["apply", "get", "logs", "delete"]
    return {need for run in runs for need in kubectl_needs(run["argv"], run["stdin"])}


def test_every_python_client_call_is_allowed() -> None:
    granted = rules("ClusterRole") + rules("Role")
    missing = {need: where for need, where in python_client_needs().items() if not allowed(need, granted)}
    assert missing == {}, "grant these in deploy/kubernetes/rbac.yaml (or stop making the calls)"


def test_the_probe_launchers_kubectl_runs_are_allowed_in_the_bots_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs = probe_launcher_needs(tmp_path, monkeypatch)
    assert Need("batch", "jobs", "create") in needs
    missing = [need for need in sorted(needs) if not allowed(need, rules("ClusterRole") + rules("Role"))]
    assert missing == []
    # Probe Jobs run GPUs: creating them is granted in the bot's namespace only, never cluster-wide.
    assert not any(allowed(need, rules("ClusterRole")) for need in needs if need.resource == "jobs")


def test_no_rule_uses_a_wildcard() -> None:
    for rule in rules("ClusterRole") + rules("Role"):
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule


def test_the_bot_can_read_pod_logs_and_cordon_nodes() -> None:
    granted = rules("ClusterRole")
    assert allowed(Need("", "pods/log", "get"), granted)
    assert allowed(Need("", "pods", "list"), granted)
    assert allowed(Need("", "nodes", "patch"), granted)  # cordon = spec.unschedulable, taint = spec.taints


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "core.read_namespaced_pod_log(name, ns, container='c', previous=True)",
            {Need("", "pods/log", "get")},
        ),
        ("core.patch_node(node, {'spec': {'unschedulable': True}})", {Need("", "nodes", "patch")}),
        ("batch.create_namespaced_job(ns, body)", {Need("batch", "jobs", "create")}),
        ("core.list_namespaced_pod(ns, label_selector=s)", {Need("", "pods", "list")}),
        (
            "core.list_pod_for_all_namespaces(watch=True)",
            {Need("", "pods", "list"), Need("", "pods", "watch")},
        ),
        (
            "for e in watch.Watch().stream(core.list_namespaced_pod, ns): pass",
            {Need("", "pods", "list"), Need("", "pods", "watch")},
        ),
        (
            'GROUP = "kubeflow.org"\napi.get_namespaced_custom_object(GROUP, "v1", ns, "pytorchjobs", name)',
            {Need("kubeflow.org", "pytorchjobs", "get")},
        ),
        ("apis.get_api_versions()", set()),  # discovery: every authenticated client may
        (
            'GROUP = "kubeflow.org"\n'
            'api.list_namespaced_custom_object(GROUP, "v1", ns, plural="pytorchjobs")',
            {Need("kubeflow.org", "pytorchjobs", "list")},
        ),
    ],
)
def test_calls_are_found_in_source_and_mapped_to_permissions(source: str, expected: set[Need]) -> None:
    found = {need for call in calls_in(source, "example.py") for need in needs_of_call(call)}
    assert found == expected


def test_a_custom_object_call_without_literal_group_is_refused() -> None:
    [call] = calls_in("api.list_cluster_custom_object(group, 'v1', plural)", "example.py")
    assert isinstance(call, Call)
    with pytest.raises(AssertionError, match="group and plural as string literals"):
        needs_of_call(call)
