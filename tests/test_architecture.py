"""The layers of DESIGN.md hold: a test walks every import of the project and fails on a boundary crossed.

Rules are data (one table below): for each package, the imports it must never make. A module's imports
include those inside functions (lazy imports cross boundaries just the same).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FRONT_ENDS = ("bot.commands", "bot.slack", "bot.webhook", "bot.digest")
SLACK_LIBRARIES = ("slack_bolt", "slack_sdk")
HTTP_LIBRARIES = ("flask", "werkzeug", "waitress")

# package -> prefixes it must not import (a prefix matches the module itself and its submodules)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "matcher": ("bot", "runbooks", "probes", *SLACK_LIBRARIES, "sqlalchemy"),
    "runbooks": ("bot", "probes", *SLACK_LIBRARIES, "sqlalchemy"),
    "probes": ("bot", "matcher", "runbooks", *SLACK_LIBRARIES, "sqlalchemy"),
    # Plain data across bot's layers: it imports none of them.
    "bot.model": (
        *FRONT_ENDS,
        "bot.services",
        "bot.store",
        "bot.render",
        "bot.server",
        "bot.jobs",
        *SLACK_LIBRARIES,
        *HTTP_LIBRARIES,
        "sqlalchemy",
        "apscheduler",
    ),
    "bot.store": (*FRONT_ENDS, "bot.services", "bot.render", "bot.server", "bot.jobs", *SLACK_LIBRARIES),
    "bot.services": (*FRONT_ENDS, "bot.server", *SLACK_LIBRARIES, *HTTP_LIBRARIES, "argparse", "apscheduler"),
    "bot.render": (*FRONT_ENDS, "bot.server", "bot.services", *SLACK_LIBRARIES, "sqlalchemy", "apscheduler"),
    "bot.jobs": (*FRONT_ENDS, "bot.server", *SLACK_LIBRARIES, *HTTP_LIBRARIES, "apscheduler"),
    # Front ends never import each other (the server wires them together).
    "bot.commands": ("bot.slack", "bot.webhook", "bot.digest", *SLACK_LIBRARIES, "apscheduler"),
    "bot.slack": ("bot.commands", "bot.webhook", "bot.digest", "apscheduler"),
    "bot.webhook": ("bot.commands", "bot.slack", "bot.digest", *SLACK_LIBRARIES, "apscheduler"),
    "bot.digest": ("bot.commands", "bot.slack", "bot.webhook", *SLACK_LIBRARIES),
    "bot.server": ("bot.commands", *SLACK_LIBRARIES, "apscheduler"),
    # Log plumbing is imported by the store and the services: it depends on nothing of the bot.
    "bot.logs": (*FRONT_ENDS, "bot.server", "bot.services", "bot.store", *SLACK_LIBRARIES, *HTTP_LIBRARIES),
}

# Libraries that exactly one package may import.
OWNED_BY: dict[str, str] = {
    "slack_bolt": "bot.slack",
    "slack_sdk": "bot.slack",
    "apscheduler": "bot.digest",
    "kubernetes": "bot.jobs.k8s",  # the official client: only the kubernetes job source and actions
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    return imports_in(path.read_text(), package)


def imports_in(source: str, package: str) -> set[str]:
    """Absolute names of everything `source` imports (relative imports resolved against `package`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def project_modules() -> list[Path]:
    return sorted(p for top in ("matcher", "runbooks", "probes", "bot") for p in (ROOT / top).rglob("*.py"))


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _package_of(module: str, packages: list[str]) -> str | None:
    found = [p for p in packages if _matches(module, p)]
    return max(found, key=len) if found else None


def crossings() -> list[str]:
    problems = []
    packages = list(FORBIDDEN)
    for path in project_modules():
        module = module_name(path)
        package = _package_of(module, packages)
        for name in sorted(imports_of(path)):
            if package is not None:
                problems += [
                    f"{module} imports {name} ({package} must not import {prefix})"
                    for prefix in FORBIDDEN[package]
                    if _matches(name, prefix)
                ]
            for library, owner in OWNED_BY.items():
                if _matches(name, library) and not _matches(module, owner):
                    problems.append(f"{module} imports {name} (only {owner} may)")
    return sorted(set(problems))


def test_no_module_crosses_a_layer_boundary() -> None:
    assert crossings() == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from bot.slack import app", "bot.slack"),
        ("import slack_sdk.web", "slack_sdk.web"),
        ("def f():\n    from bot.webhook.queue import claim", "bot.webhook.queue"),
        ("from ..store import Store", "bot.store.Store"),
    ],
)
def test_lazy_relative_and_dotted_imports_are_seen(source: str, expected: str) -> None:
    assert expected in imports_in(source, package="bot.services")
