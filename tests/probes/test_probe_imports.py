"""probes/ runs on GPU nodes with torch alone, and the bot side must work without torch at all."""

from __future__ import annotations

import ast
import subprocess
import sys

from .helpers import ROOT

PROBES = ROOT / "probes"
# Imported lazily by the one launcher that needs it; the probe itself never does.
LAUNCHER_ONLY = {"asyncssh": {"launchers/ssh.py"}}


def imported_roots(path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_probes_import_only_stdlib_torch_and_themselves() -> None:
    allowed = set(sys.stdlib_module_names) | {"torch", "probes", "__future__"}
    for path in PROBES.rglob("*.py"):
        relative = str(path.relative_to(PROBES))
        extra = {root for root, files in LAUNCHER_ONLY.items() if relative in files}
        unexpected = imported_roots(path) - allowed - extra
        assert not unexpected, f"{relative} imports {sorted(unexpected)}"


def test_the_bot_side_of_the_probe_does_not_load_torch() -> None:
    code = (
        "import sys, bot.commands.probe, probes.launchers, probes.launchers.local, probes.launchers.ssh, "
        "probes.launchers.slurm, probes.launchers.kubernetes, probes.bisect, probes.result, probes.verdict; "
        "assert 'torch' not in sys.modules, 'torch was imported'; assert 'asyncssh' not in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
