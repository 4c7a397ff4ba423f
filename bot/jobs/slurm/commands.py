"""Running Slurm's client commands: argument lists under a timeout, from a configurable bin directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.jobs.model import JobError
from probes.launchers.base import CommandOutcome, run_command

DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class SlurmCommands:
    """`bin_dir` is where scontrol / sacct live when they are not on PATH (NCCLBOT_SLURM_BIN_DIR)."""

    bin_dir: Path | None = None
    timeout: float = DEFAULT_TIMEOUT_S

    def argv(self, tool: str, *args: str) -> list[str]:
        program = str(self.bin_dir / tool) if self.bin_dir is not None else tool
        return [program, *args]

    def run(self, tool: str, *args: str) -> CommandOutcome:
        """Run `tool args...`; a missing tool or a timeout is a JobError, a non-zero status is not."""
        return self.execute(self.argv(tool, *args))

    def execute(self, argv: list[str]) -> CommandOutcome:
        tool = Path(argv[0]).name
        outcome = run_command(argv, timeout=self.timeout)
        if outcome.missing_tool:
            raise JobError(
                f"{argv[0]} not found: Slurm client tools are not installed here (NCCLBOT_SLURM_BIN_DIR)"
            )
        if outcome.timed_out:
            raise JobError(f"{tool} did not answer within {self.timeout:g} s (is slurmctld up?)")
        return outcome


def first_line(outcome: CommandOutcome) -> str:
    """The scheduler's own message, as one line."""
    text = (outcome.stderr.strip() or outcome.stdout.strip()).splitlines()
    return text[0][:300] if text else f"exit status {outcome.returncode}"
