"""deploy/kubernetes/: every manifest validates (strictly: no unknown fields) against the Kubernetes
schemas of the oldest and newest supported releases, and the pieces fit together (probes on /healthz
and /readyz, names that refer to each other, settings the bot accepts)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from bot.settings import known_variables, load_settings

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
# The oldest release still commonly run and the newest the bundled schemas know.
VERSIONS = ("1.29.0", kubernetes_validate.latest_version())


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def manifest_files() -> list[Path]:
    return sorted(path for path in MANIFESTS.glob("*.yaml") if path.name != "kustomization.yaml")


def objects() -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for path in manifest_files() for d in documents(path)}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", manifest_files(), ids=lambda path: path.name)
def test_manifest_validates_against_the_kubernetes_schema(path: Path, version: str) -> None:
    for document in documents(path):
        kubernetes_validate.validate(document, version, strict=True)


def test_a_wrong_field_is_caught_by_the_validation() -> None:
    deployment = objects()[("Deployment", "ncclbot")]
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/readyz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[0], strict=True)


def test_kustomization_applies_every_manifest_but_the_templates() -> None:
    [kustomization] = documents(MANIFESTS / "kustomization.yaml")
    templates = {"probe-job.yaml", "secret.example.yaml"}  # filled in per node / made with kubectl
    assert set(kustomization["resources"]) == {p.name for p in manifest_files()} - templates


def container() -> dict[str, Any]:
    [only] = objects()[("Deployment", "ncclbot")]["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = only
    return found


def test_probes_point_at_healthz_and_readyz_on_the_served_port() -> None:
    bot = container()
    assert bot["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert bot["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert bot["readinessProbe"]["httpGet"]["path"] == "/readyz"
    [port] = bot["ports"]
    assert port["containerPort"] == 3000  # NCCLBOT_PORT's default, as the image sets it
    service = objects()[("Service", "ncclbot")]
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]


def test_the_pod_runs_unprivileged_as_the_images_user() -> None:
    deployment = objects()[("Deployment", "ncclbot")]
    pod = deployment["spec"]["template"]["spec"]
    user = re.search(r"^USER (\d+):(\d+)$", (ROOT / "deploy/docker/Dockerfile").read_text(), re.MULTILINE)
    assert user is not None
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(user.group(1))
    bot = container()["securityContext"]
    assert bot == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert {"requests", "limits"} <= set(container()["resources"])
    # Read-only root: everything the server writes has a volume.
    mounts = {mount["mountPath"] for mount in container()["volumeMounts"]}
    assert {"/tmp", "/var/lib/ncclbot"} <= mounts


def test_references_between_manifests_resolve() -> None:
    found = objects()
    pod = found[("Deployment", "ncclbot")]["spec"]["template"]["spec"]
    assert ("ServiceAccount", pod["serviceAccountName"]) in found
    [secret_ref] = container()["envFrom"]
    assert ("Secret", secret_ref["secretRef"]["name"]) in found  # the example shows its keys
    [config_volume] = [v for v in pod["volumes"] if "configMap" in v]
    assert ("ConfigMap", config_volume["configMap"]["name"]) in found
    for binding in (found[("ClusterRoleBinding", "ncclbot")], found[("RoleBinding", "ncclbot-probes")]):
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in found
        assert binding["subjects"][0]["name"] == pod["serviceAccountName"]


def test_the_shipped_settings_are_accepted_by_the_bot(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key in [k for k in os.environ if k.startswith(("NCCLBOT_", "SLACK_")) and "_TEST_" not in k]:
        monkeypatch.delenv(key)
    config = tmp_path / "ncclbot.toml"
    config.write_text(objects()[("ConfigMap", "ncclbot-config")]["data"]["ncclbot.toml"])
    monkeypatch.setenv("NCCLBOT_CONFIG", str(config))
    settings = load_settings()
    assert settings.log_format == "json"
    # Probe Jobs go where the Role allows the bot to create them.
    assert settings.probe_k8s_namespace == objects()[("Role", "ncclbot-probes")]["metadata"]["namespace"]
    secret_keys = set(objects()[("Secret", "ncclbot-secrets")]["stringData"])
    assert secret_keys <= set(known_variables())
    env_names = {item["name"] for item in container()["env"]}
    assert env_names <= set(known_variables())
