"""What every launcher shares: host-name validation, running an argument list under a timeout, and
turning what came back into a ProbeResult (the probe's own, or a clear failure). Stdlib only.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from probes import progress
from probes.result import ProbeResult, failure, find_result_line

# RFC 1123 host names (labels of letters, digits and inner hyphens, dot separated, 253 characters at
# most). Anything else (spaces, shell metacharacters, a leading dash that would read as an option) is
# refused before it reaches ssh, srun or kubectl.
LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOSTNAME = re.compile(rf"^{LABEL}(?:\.{LABEL})*$")
# Beyond the probe's own deadline, room for connecting, scheduling and starting Python.
LAUNCH_OVERHEAD_S = 60.0


class LaunchError(ValueError):
    """A launch that cannot even be attempted (bad host name, missing configuration)."""


def validate_host(name: str) -> str:
    """Return `name` when it is an RFC 1123 host name or an IP address; raise LaunchError otherwise."""
    if not isinstance(name, str) or not name:
        raise LaunchError("empty node name")
    try:
        ipaddress.ip_address(name)
        return name
    except ValueError:
        pass
    if len(name) > 253 or not HOSTNAME.match(name):
        raise LaunchError(f"invalid node name {name!r}: expected an RFC 1123 host name or an IP address")
    return name


def validate_hosts(names: Sequence[str]) -> list[str]:
    hosts = [validate_host(name) for name in names]
    if len(set(hosts)) != len(hosts):
        raise LaunchError("the same node is named twice")
    return hosts


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    missing_tool: bool = False


def run_command(
    argv: Sequence[str],
    *,
    timeout: float,
    on_line: Callable[[str], None] | None = None,
    stdin_text: str | None = None,
    env: Mapping[str, str] | None = None,
) -> CommandOutcome:
    """Run an argument list (never a shell) in its own session; kill the whole group at the timeout.

    stderr lines are handed to `on_line` as they arrive, so progress reaches the caller live.
    """
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env=None if env is None else dict(env),
        )
    except FileNotFoundError:
        return CommandOutcome(None, "", f"{argv[0]}: command not found", missing_tool=True)
    out: list[str] = []
    err: list[str] = []

    def read(stream: IO[str] | None, sink: list[str], callback: Callable[[str], None] | None) -> None:
        for line in stream or ():
            sink.append(line)
            if callback is not None:
                callback(line)

    readers = [
        threading.Thread(target=read, args=(process.stdout, out, None), daemon=True),
        threading.Thread(target=read, args=(process.stderr, err, on_line), daemon=True),
    ]
    for reader in readers:
        reader.start()
    if stdin_text is not None and process.stdin is not None:
        try:
            process.stdin.write(stdin_text)
            process.stdin.close()
        except BrokenPipeError:
            pass
    timed_out = False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        _wait_for_group_exit(process.pid)
    for reader in readers:
        reader.join(timeout=2.0)
    return CommandOutcome(process.returncode, "".join(out), "".join(err), timed_out)


def _wait_for_group_exit(pgid: int, limit_s: float = 10.0) -> None:
    """SIGKILL is delivered asynchronously: on a loaded machine the group's other members (the ranks)
    can outlive `killpg` by a moment. Wait until none is left, so that "timed out" means "gone"."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.02)


def describe_failure(stderr: str) -> str | None:
    """Name the usual reasons a remote command never ran, from the client's error text."""
    text = stderr.lower()
    patterns = (
        ("host key verification failed", "host key verification failed"),
        ("permission denied", "refused: permission denied (key not accepted)"),
        ("connection refused", "refused: connection refused"),
        ("could not resolve hostname", "unreachable: host name does not resolve"),
        ("name or service not known", "unreachable: host name does not resolve"),
        ("no route to host", "unreachable: no route to host"),
        ("network is unreachable", "unreachable: network is unreachable"),
        ("connection timed out", "unreachable: connection timed out"),
        ("invalid node name", "refused by the scheduler: invalid node name"),
        ("no module named probes", "the probe is not installed on the node (no module named probes)"),
        ("no module named torch", "torch is not installed on the node"),
    )
    return next((reason for needle, reason in patterns if needle in text), None)


def result_from_output(
    stdout: str,
    stderr: str,
    *,
    host: str,
    launcher: str,
    returncode: int | None,
    timed_out: bool,
    timeout: float,
    tracker: progress.Tracker | None = None,
) -> ProbeResult:
    """The probe's own result when it printed one; otherwise a failed result saying why."""
    result = find_result_line(stdout)
    if result is not None:
        result.launcher = launcher
        return result
    if timed_out:
        reason = f"timed out: no result from {host} within {timeout:g} s"
        if tracker is not None and tracker.world_size:
            missing = tracker.missing()
            if missing:
                reason += f"; ranks that never checked in: {', '.join(map(str, missing))}"
    else:
        known = describe_failure(stderr)
        tail = stderr.strip().splitlines()[-1][:300] if stderr.strip() else "no output"
        reason = f"{known} ({tail})" if known else f"probe exited with status {returncode}: {tail}"
    return failure(reason, host=host, launcher=launcher)


def deadline_timeout(deadline: float, timeout: float | None) -> float:
    return timeout if timeout is not None else deadline + LAUNCH_OVERHEAD_S


def elapsed_since(start: float) -> float:
    return round(time.monotonic() - start, 3)
