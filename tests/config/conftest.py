"""Each settings test starts from an environment without any ncclbot or Slack setting (the developer's
shell and CI export some), so that what a test sets is all there is."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def bare_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.upper().startswith(("NCCLBOT_", "SLACK_")) and not key.upper().startswith("NCCLBOT_TEST_"):
            monkeypatch.delenv(key)
