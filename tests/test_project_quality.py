"""Project-wide checks: lint, format, types, and that CI runs exactly the README's test command."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    candidate = Path(sys.executable).with_name(name)
    found = str(candidate) if candidate.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_ruff_lint_is_clean() -> None:
    result = _run(_tool("ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _run(_tool("ruff"), "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    result = _run(_tool("mypy"))
    assert result.returncode == 0, result.stdout + result.stderr


def readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.+?)\n```", quickstart)


def test_quickstart_is_exactly_two_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2, commands
    assert "ncclbot diagnose" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci_lines
