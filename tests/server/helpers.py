"""Start `ncclbot serve` as a subprocess on a free loopback port and tear it down afterwards.

The server's output goes to a log file (a pipe nobody reads would fill up and stall the server); the
first line says where it listens."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60
READY_LINE = "ncclbot: serving on "


@dataclass
class RunningServer:
    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: no proxies (slack_sdk honours HTTPS_PROXY and ignores NO_PROXY), no
    Slack or ncclbot settings leaking in from the developer's shell."""
    keep = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV"}
    env = {key: value for key, value in os.environ.items() if key in keep}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def start_server(env: Mapping[str, str] | None = None, args: tuple[str, ...] = ()) -> RunningServer:
    handle, name = tempfile.mkstemp(prefix="ncclbot-serve-", suffix=".log")
    log_path = Path(name)
    environment = clean_environment(env)
    # The server opens its store at start: never the developer's own default SQLite file.
    environment.setdefault("NCCLBOT_DATABASE_URL", f"sqlite:///{log_path.with_suffix('.sqlite3')}")
    with os.fdopen(handle, "wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", "0", *args],
            cwd=ROOT,
            env=environment,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for line in log_path.read_text(errors="replace").splitlines():
            if line.startswith(READY_LINE):
                return RunningServer(process=process, url=line[len(READY_LINE) :].strip(), log_path=log_path)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    stop_server(process)
    raise AssertionError("ncclbot serve did not start:\n" + log_path.read_text(errors="replace"))


def stop_server(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running_server(
    env: Mapping[str, str] | None = None, args: tuple[str, ...] = ()
) -> Iterator[RunningServer]:
    server = start_server(env, args)
    try:
        yield server
    finally:
        stop_server(server.process)
        server.log_path.unlink(missing_ok=True)
        for leftover in server.log_path.parent.glob(server.log_path.stem + ".sqlite3*"):
            leftover.unlink()
