"""One configured CoreV1Api: a kubeconfig file and context when given, else in-cluster credentials,
else the default kubeconfig (~/.kube/config)."""

from __future__ import annotations

from typing import Any

from bot.jobs.model import JobError
from bot.settings import Settings

REQUEST_TIMEOUT_S = 30


def core_api(settings: Settings) -> Any:
    try:
        from kubernetes import client, config
    except ImportError:
        raise JobError(
            "the kubernetes job source needs the kubernetes client: pip install 'ncclbot[kubernetes]'"
        ) from None
    try:
        if settings.kubernetes_kubeconfig is not None:
            api_client = config.new_client_from_config(
                config_file=str(settings.kubernetes_kubeconfig), context=settings.kubernetes_context
            )
        else:
            try:
                config.load_incluster_config()
                api_client = client.ApiClient()
            except config.ConfigException:
                api_client = config.new_client_from_config(context=settings.kubernetes_context)
    except (config.ConfigException, OSError) as error:
        raise JobError(f"Kubernetes is not configured: {error} (NCCLBOT_KUBERNETES_KUBECONFIG)") from None
    return client.CoreV1Api(api_client)


def api_error(error: Exception) -> str:
    """The API server's own message (its Status object), as one line."""
    status, reason, body = (
        getattr(error, "status", None),
        getattr(error, "reason", None),
        getattr(error, "body", None),
    )
    message = ""
    if isinstance(body, (str, bytes)):
        import json

        try:
            message = json.loads(body).get("message", "")
        except (ValueError, AttributeError):
            message = body.decode(errors="replace") if isinstance(body, bytes) else body
    text = " ".join(str(part) for part in (status, reason, message or error) if part)
    return (text.splitlines() or [""])[0][:300]
