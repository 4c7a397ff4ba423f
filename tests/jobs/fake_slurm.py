"""Stand-in Slurm client commands that answer with recorded output, for the Slurm versions and set-ups
this machine cannot run (slurmdbd accounting, Slurm 24.05+ sacct). The real single-node Slurm of CI
covers 22.05 with jobcomp/filetxt (tests/jobs/test_slurm_cluster.py).

Each tool is an executable that logs its argv (one JSON list a line) and prints the first recorded
answer whose argument substring matches."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

SCRIPT = """#!{python}
import json, sys
answers = json.loads(open({answers!r}).read())
with open({calls!r}, "a") as log:
    log.write(json.dumps(sys.argv) + "\\n")
line = " ".join(sys.argv[1:])
for needle, (status, out, err) in answers:
    if needle in line:
        sys.stdout.write(out)
        sys.stderr.write(err)
        sys.exit(status)
sys.stderr.write("fake slurm: no recorded answer for " + line + "\\n")
sys.exit(99)
"""


@dataclass
class FakeSlurm:
    bin_dir: Path
    calls_file: Path

    def answer(self, tool: str, needle: str, stdout: str = "", stderr: str = "", status: int = 0) -> None:
        answers_file = self.bin_dir / f"{tool}.json"
        answers = json.loads(answers_file.read_text()) if answers_file.exists() else []
        answers.append([needle, [status, stdout, stderr]])
        answers_file.write_text(json.dumps(answers))
        program = self.bin_dir / tool
        if not program.exists():
            program.write_text(
                SCRIPT.format(python=sys.executable, answers=str(answers_file), calls=str(self.calls_file))
            )
            program.chmod(0o755)

    def calls(self) -> list[list[str]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line)[1:] for line in self.calls_file.read_text().splitlines()]


def fake_slurm(tmp_path: Path) -> FakeSlurm:
    bin_dir = tmp_path / "slurm-bin"
    bin_dir.mkdir()
    return FakeSlurm(bin_dir=bin_dir, calls_file=tmp_path / "slurm-calls.jsonl")
