"""Alertmanager says a PyTorchJob failed; the bot fetches the failed pods' logs through the kubernetes
job source (official client, fake API server: no cluster can run here) and posts the diagnosis."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.jobs.fake_kube import FakeKube
from tests.jobs.test_kubernetes import kube  # noqa: F401 (fixture)
from tests.webhook.harness import running_webhook, settings_for
from tests.webhook.test_shapes import example


def test_a_failed_pytorchjob_reported_by_alertmanager_is_diagnosed_from_its_pod_logs(
    kube: FakeKube,  # noqa: F811
    tmp_path: Path,
) -> None:
    settings = settings_for(
        f"sqlite:///{tmp_path / 'bot.db'}",
        webhook_bearer_token="am-token",
        job_sources={"k8s-east": "kubernetes"},
        kubernetes_kubeconfig=kube.kubeconfig(tmp_path),
    )
    alert = example("alertmanager")
    alert["alerts"][0]["labels"]["job_name"] = "bert-large"
    with running_webhook(settings) as webhook:
        body = json.dumps(alert).encode()
        answer = webhook.post(body, {"Authorization": "Bearer am-token", "Content-Type": "application/json"})
        assert answer.status == 202, answer.body
        deadline = time.monotonic() + 30
        while not webhook.outlet.top_level() and time.monotonic() < deadline:
            time.sleep(0.1)
        [post] = webhook.outlet.top_level()
    assert (
        post.message.text == "cuda/oom: CUDA out of memory on a rank (culprit gpu-node-018)"
    )  # its pod's node
    assert "*Job:* `research/bert-large` on `k8s-east`" in json.dumps(post.message.blocks)
