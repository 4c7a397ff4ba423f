"""Build deploy/docker/Dockerfile with podman and run the image, as CI does (.ci/services/podman.sh
provides podman, a containers.conf for this VM and a locally debootstrapped Debian 12 base image).

The build has no network at all (`--network none`): the Python packages come from wheels made on the
host by pip with its own configuration (mounted read-only at /wheels). The container runs on the host's
network bound to 127.0.0.1, so nothing it does leaves loopback.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import need_service

ROOT = Path(__file__).resolve().parents[2]
BASE_ENV = "NCCLBOT_TEST_PODMAN_BASE"
CACHE_ENV = "NCCLBOT_TEST_PODMAN_CACHE"
IMAGE = "localhost/ncclbot:ci"
LABEL = "org.opencontainers.image.title=ncclbot"  # set by deploy/docker/Dockerfile
BUILD_TIMEOUT_S = 600
# What the Dockerfile installs (its default EXTRAS), and setuptools to build ncclbot inside the image.
IMAGE_REQUIREMENTS = (".[postgres,kubernetes]", "setuptools>=68")
START_TIMEOUT_S = 60


def need_podman() -> str:
    """The base image to build from (skips, or fails under CI, without podman)."""
    base = os.environ.get(BASE_ENV, "")
    need_service(
        bool(shutil.which("podman")) and bool(base),
        f"podman and {BASE_ENV} are needed (source .ci/services/podman.sh)",
    )
    return base


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def host_wheels(cache: Path) -> Path:
    """Every wheel the image needs, built or fetched by the host's pip (its index configuration and
    cache), plus setuptools to build ncclbot itself inside the image."""
    wheels = cache / "wheels"
    # The wheels follow from pyproject.toml alone: made again only when it changes (saves ~10 s a run).
    stamp = wheels / f".pyproject-{hashlib.sha256((ROOT / 'pyproject.toml').read_bytes()).hexdigest()[:16]}"
    if stamp.exists():
        return wheels
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", f"--wheel-dir={wheels}", *IMAGE_REQUIREMENTS],
        cwd=ROOT,
        check=True,
        timeout=BUILD_TIMEOUT_S,
        capture_output=True,
    )
    stamp.touch()
    return wheels


def build_image(base: str) -> float:
    """Build IMAGE from the Dockerfile as a user would (repository root as context); returns seconds."""
    cache = Path(os.environ.get(CACHE_ENV) or "/var/tmp/ncclbot-podman")
    started = time.monotonic()
    wheels = host_wheels(cache)
    podman(
        "build",
        "--quiet",
        "--format=docker",  # the OCI format has no HEALTHCHECK
        "--network=none",
        f"--volume={wheels}:/wheels:ro",
        f"--build-arg=BASE={base}",
        "--build-arg=PIP_ARGS=--no-index --find-links /wheels",
        f"--tag={IMAGE}",
        "--file=deploy/docker/Dockerfile",
        str(ROOT),
        timeout=BUILD_TIMEOUT_S,
    )
    # A rebuild leaves the previous image and the wheel stage untagged: drop those (ours only, by label).
    # The layers the cache reuses (the dependencies' layer) are parents of the new image and stay.
    podman("image", "prune", "--force", f"--filter=label={LABEL}", check=False)
    return time.monotonic() - started


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def http(
    method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@dataclass
class Container:
    name: str
    url: str

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return result.stdout + result.stderr

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.name, *command, check=False, timeout=60)

    def state(self) -> dict[str, object]:
        inspected = json.loads(podman("inspect", self.name).stdout)
        state: dict[str, object] = inspected[0]["State"]
        return state


@contextmanager
def running_container(env: Mapping[str, str] | None = None) -> Iterator[Container]:
    """IMAGE running `ncclbot serve` on 127.0.0.1:<free port>, removed afterwards."""
    port = free_port()
    name = f"ncclbot-test-{secrets.token_hex(4)}"
    settings = {"NCCLBOT_HOST": "127.0.0.1", "NCCLBOT_PORT": str(port), **(env or {})}
    podman("run", "--detach", f"--name={name}", "--network=host",
           *[f"--env={key}={value}" for key, value in settings.items()], IMAGE)  # fmt: skip
    container = Container(name=name, url=f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if http("GET", f"{container.url}/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or not container.state().get("Running"):
                raise AssertionError(f"the container did not start:\n{container.logs()}")
            time.sleep(0.2)
        yield container
    finally:
        podman("rm", "--force", "--time=5", name, check=False)
