"""A fake Kubernetes API server over real HTTP, serving recorded-shape objects to the official client.

No Kubernetes cluster can run on these machines, so the kubernetes job source and cluster actions are
tested against this: the real `kubernetes` client, a kubeconfig pointing at http://127.0.0.1:PORT,
and responses shaped like the API server's (PodList, Pod logs, Node, Status, JSON merge patch). It
serves only what those two pieces use; every request is recorded for assertions.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@dataclass
class KubeState:
    pods: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # namespace -> pods
    logs: dict[tuple[str, str, bool], str] = field(default_factory=dict)  # (pod, container, previous)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)  # (method, path?query, body)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip


def _handler(state: KubeState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            return

        def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self, method: str) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            parts = url.path.strip("/").split("/")
            with state.lock:
                state.requests.append((method, self.path, body))
                if parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5 and parts[4] == "pods":
                    return self._pods(method, parts, query)
                if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
                    return self._node(method, parts[3], body)
            self._send(
                404,
                _status(404, "NotFound", f"the server could not find the requested resource ({url.path})"),
            )

        def _pods(self, method: str, parts: list[str], query: dict[str, str]) -> None:
            namespace = parts[3]
            pods = state.pods.get(namespace, [])
            if len(parts) == 5 and method == "GET":
                wanted = dict(
                    item.split("=", 1) for item in query.get("labelSelector", "").split(",") if item
                )
                items = [
                    p
                    for p in pods
                    if all(p["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
                ]
                return self._send(200, {"kind": "PodList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": "4242"}, "items": items})  # fmt: skip
            if len(parts) == 7 and parts[6] == "log" and method == "GET":
                previous = query.get("previous") == "true"
                key = (parts[5], query.get("container", ""), previous)
                if key not in state.logs:
                    message = f'previous terminated container "{key[1]}" in pod "{key[0]}" not found'
                    return self._send(400, _status(400, "BadRequest", message))
                text = state.logs[key]
                limit = int(query.get("limitBytes", "0") or 0)
                return self._send(
                    200, text.encode()[:limit].decode(errors="ignore") if limit else text, "text/plain"
                )
            self._send(405, _status(405, "MethodNotAllowed", "not served by the fake"))

        def _node(self, method: str, name: str, body: Any) -> None:
            node = state.nodes.get(name)
            if node is None:
                return self._send(404, _status(404, "NotFound", f'nodes "{name}" not found'))
            if method == "PATCH":
                if self.headers.get("Content-Type") != "application/merge-patch+json":
                    return self._send(
                        415, _status(415, "UnsupportedMediaType", "the fake takes merge patches")
                    )
                sent_version = (body.get("metadata") or {}).get("resourceVersion")
                if sent_version and sent_version != node["metadata"]["resourceVersion"]:
                    return self._send(409, _status(409, "Conflict", "the object has been modified"))
                node = merge_patch(node, body)
                node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
                state.nodes[name] = node
            self._send(200, node)

        def do_GET(self) -> None:
            self._route("GET")

        def do_PATCH(self) -> None:
            self._route("PATCH")

    return Handler


@dataclass
class FakeKube:
    url: str
    state: KubeState

    def kubeconfig(self, folder: Path, *, namespace: str = "default") -> Path:
        path = folder / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "bot", "user": {"token": "fake-token"}}],
            "contexts": [
                {"name": "fake", "context": {"cluster": "fake", "user": "bot", "namespace": namespace}}
            ],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config))
        return path


@contextmanager
def fake_kube(state: KubeState) -> Iterator[FakeKube]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield FakeKube(f"http://127.0.0.1:{server.server_address[1]}", state)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
