"""Shared test helpers.

Service-backed tests (PostgreSQL, Slurm, sshd, network namespaces) call `need_service`: on a developer
laptop without the service they skip with the reason; under CI (`CI=true`, set by .ci/run, which starts
every service) a missing service is a failure, so a green CI never hides a skipped check.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def need_service(available: bool, reason: str) -> None:
    """Skip (laptop) or fail (CI) when a service a test needs is not there."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"CI must provide this service: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared (corpus, Flight Recorder samples) is not beside this checkout")
    return SHARED
