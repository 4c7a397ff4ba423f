"""Run the probe on this machine as a subprocess (`python -m probes.allreduce`), Gloo on CPU or NCCL."""

from __future__ import annotations

import dataclasses
import os
import socket
import sys

from probes import progress
from probes.launchers.base import deadline_timeout, result_from_output, run_command
from probes.options import ProbeOptions
from probes.result import ProbeResult


def probe_argv(opts: ProbeOptions, python: str = sys.executable) -> list[str]:
    forced = dataclasses.replace(opts, json=True)
    return [python, "-m", "probes.allreduce", *forced.to_argv()]


def launch(
    opts: ProbeOptions,
    *,
    on_progress: progress.ProgressCallback | None = None,
    timeout: float | None = None,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
) -> ProbeResult:
    """Probe this machine; the result always comes back (a failed one when the probe did not report)."""
    limit = deadline_timeout(opts.deadline, timeout)
    tracker = progress.Tracker(on_progress)
    child_env = dict(os.environ if env is None else env, NCCLBOT_PROBE_LAUNCHER="local")
    outcome = run_command(probe_argv(opts, python), timeout=limit, on_line=tracker.feed, env=child_env)
    return result_from_output(
        outcome.stdout,
        outcome.stderr,
        host=socket.gethostname(),
        launcher="local",
        returncode=outcome.returncode,
        timed_out=outcome.timed_out,
        timeout=limit,
        tracker=tracker,
    )
