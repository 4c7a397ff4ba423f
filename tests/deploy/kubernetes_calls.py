"""Which Kubernetes API permissions the code needs, found from the code itself (so that a new call
anywhere in bot/ or probes/ is checked against deploy/kubernetes/rbac.yaml without anyone listing it):

- calls of the official Python client (`core.read_namespaced_pod_log(...)`, `watch.stream(core.list_...)`)
  are found by walking the source; each method is run once against a recording ApiClient, which gives the
  HTTP method and path the client really uses, and that path names the RBAC group, resource and verb;
- `kubectl` runs (the probe launcher) are observed by running the launcher against a fake kubectl, and
  each command is mapped to what kubectl asks the API server for.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import kubernetes.client

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("bot", "probes")
# Client methods that may act on resources (discovery calls such as get_api_resources turn out to need
# no grant: their paths name no resource).
RESOURCE_METHOD = re.compile(r"^(get|list|read|create|patch|replace|delete|connect)_")
CUSTOM_OBJECT_PARAMS = ("group", "plural")


@dataclass(frozen=True, order=True)
class Need:
    """One permission: verb on resource (with subresource: `pods/log`) in an API group ("" = core)."""

    group: str
    resource: str
    verb: str


@dataclass(frozen=True)
class Call:
    where: str  # path:line
    method: str
    watched: bool
    literals: tuple[tuple[str, str], ...]  # custom-object group/plural given at the call site


class _Recorded(Exception):
    pass


class _RecordingClient(kubernetes.client.ApiClient):
    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        raise _Recorded(method, url)


@cache
def client_methods() -> dict[str, tuple[type, ...]]:
    """Resource method name -> the API classes of the client that have it."""
    found: dict[str, list[type]] = {}
    for name in dir(kubernetes.client):
        cls = getattr(kubernetes.client, name)
        if not (isinstance(cls, type) and name.endswith("Api") and name != "ApiClient"):
            continue
        for method in vars(cls):
            if RESOURCE_METHOD.match(method) and not method.endswith(
                ("_with_http_info", "_without_preload_content")
            ):
                found.setdefault(method, []).append(cls)
    return {method: tuple(classes) for method, classes in found.items()}


def request_of(cls: type, method: str, given: dict[str, str]) -> tuple[str, str]:
    """(HTTP method, path) the client sends for `cls.method`, with placeholder arguments."""
    bound = getattr(cls(_RecordingClient()), method)
    arguments: dict[str, Any] = {}
    for parameter in inspect.signature(bound).parameters.values():
        if parameter.default is inspect.Parameter.empty and parameter.kind is not parameter.VAR_KEYWORD:
            arguments[parameter.name] = {} if parameter.name == "body" else given.get(parameter.name, "NAME")
    try:
        bound(**arguments)
    except _Recorded as recorded:
        http_method, url = recorded.args
        return http_method, urlparse(url).path
    raise AssertionError(f"{cls.__name__}.{method} sent no request")


def needs_of_request(http_method: str, path: str, watched: bool) -> Need | None:
    """The permission a request needs; None for paths outside the resource API (/version, discovery)."""
    parts = [part for part in path.split("/") if part]
    if not parts or parts[0] not in {"api", "apis"}:
        return None
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1] if len(parts) > 1 else "", parts[3:])
    if not rest:
        return None
    if len(rest) > 2 and rest[0] == "namespaces":
        rest = rest[2:]  # a namespaced resource; RBAC names the resource alone
    resource, named, subresource = rest[0], len(rest) > 1, rest[2] if len(rest) > 2 else None
    full = f"{resource}/{subresource}" if subresource else resource
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch"}
    if http_method == "GET":
        verb = "get" if named else ("watch" if watched else "list")
    elif http_method == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = verbs[http_method]
    return Need(group, full, verb)


def needs_of_call(call: Call) -> set[Need]:
    needs = set()
    given = dict(call.literals)
    for cls in client_methods()[call.method]:
        if cls is kubernetes.client.CustomObjectsApi and not set(CUSTOM_OBJECT_PARAMS) <= set(given):
            raise AssertionError(
                f"{call.where}: {call.method} needs its group and plural as string literals (or module"
                " constants) so that the RBAC check can tell which resource it touches"
            )
        http_method, path = request_of(cls, call.method, given)
        for watched in {False, call.watched}:
            need = needs_of_request(http_method, path, watched=watched)
            if need is not None:
                needs.add(need)
    return needs


def _string_constants(tree: ast.Module) -> dict[str, str]:
    constants = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            constants |= {
                target.id: node.value.value for target in node.targets if isinstance(target, ast.Name)
            }
    return constants


def calls_in(source: str, where: str) -> Iterator[Call]:
    """Every reference to a client resource method in `source`: called, or handed to `watch.stream`."""
    tree = ast.parse(source)
    methods = client_methods()
    constants = _string_constants(tree)
    streamed = {
        id(argument)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "stream"
        for argument in node.args[:1]
    }
    calls = {id(node.func): node for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr in methods):
            continue
        literals: dict[str, str] = {}
        call = calls.get(id(node))
        if call is not None and methods[node.attr] == (kubernetes.client.CustomObjectsApi,):
            literals = _custom_object_literals(call, node.attr, constants)
        watched = id(node) in streamed or (
            call is not None and any(k.arg == "watch" and _truthy(k.value) for k in call.keywords)
        )
        yield Call(f"{where}:{node.lineno}", node.attr, watched, tuple(sorted(literals.items())))


def _truthy(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and bool(node.value)


def _custom_object_literals(call: ast.Call, method: str, constants: dict[str, str]) -> dict[str, str]:
    order = [
        p.name
        for p in inspect.signature(getattr(kubernetes.client.CustomObjectsApi, method)).parameters.values()
        if p.name != "self"
    ]
    given: dict[str, ast.expr] = dict(zip(order, call.args, strict=False))
    given |= {k.arg: k.value for k in call.keywords if k.arg}
    found = {}
    for name in CUSTOM_OBJECT_PARAMS:
        value = given.get(name)
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found[name] = value.value
        elif isinstance(value, ast.Name) and value.id in constants:
            found[name] = constants[value.id]
    return found


def project_calls(roots: Iterable[str] = SOURCES) -> list[Call]:
    found = []
    for top in roots:
        for path in sorted((ROOT / top).rglob("*.py")):
            found += calls_in(path.read_text(), str(path.relative_to(ROOT)))
    return found


# kubectl: what each command the launcher runs asks of the API server.
KUBECTL_RESOURCES = {"job": ("batch", "jobs"), "pod": ("", "pods"), "node": ("", "nodes")}


def kubectl_needs(argv: list[str], stdin: str | None) -> set[Need]:
    words = [word for word in argv[1:] if not word.startswith("-")]
    # Drop the values of the global flags the launcher passes (--namespace NS, --context C).
    for flag in ("--namespace", "--context"):
        if flag in argv:
            words.remove(argv[argv.index(flag) + 1])
    command = words[0]
    if command == "apply":
        kind = json.loads(stdin or "{}")["kind"].lower()
        group, resource = KUBECTL_RESOURCES[kind]
        return {Need(group, resource, verb) for verb in ("get", "create", "patch")}  # client-side apply
    if command == "logs":
        kind = words[1].split("/", 1)[0]
        group, resource = KUBECTL_RESOURCES[kind]
        return {Need(group, resource, "get"), Need("", "pods", "list"), Need("", "pods/log", "get")}
    if command in {"get", "delete"}:
        group, resource = KUBECTL_RESOURCES[words[1].split("/", 1)[0]]
        return {Need(group, resource, command)}
    raise AssertionError(
        f"no RBAC mapping for `kubectl {command}`: add it to KUBECTL_RESOURCES / kubectl_needs"
    )


FAKE_KUBECTL = """\
#!{python}
import json, os, sys
stdin = sys.stdin.read() if "-f" in sys.argv else None
with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
    log.write(json.dumps({{"argv": sys.argv, "stdin": stdin}}) + "\\n")
if "get" in sys.argv:
    print(json.dumps({{"status": {{"succeeded": 1}}}}))
"""


def write_fake_kubectl(directory: Path) -> Path:
    path = directory / "kubectl"
    path.write_text(FAKE_KUBECTL.format(python=sys.executable))
    path.chmod(0o755)
    return path


def recorded_kubectl(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
