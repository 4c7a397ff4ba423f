from __future__ import annotations

import pytest

from tests.deploy.podman import IMAGE, build_image, need_podman
from tests.store.conftest import postgres_url

__all__ = ["image", "postgres_url"]


@pytest.fixture(scope="session")
def image() -> str:
    """deploy/docker/Dockerfile built once per test session; prints how long the build took."""
    base = need_podman()
    seconds = build_image(base)
    print(f"\nimage {IMAGE} built from {base} in {seconds:.1f} s")
    return IMAGE
