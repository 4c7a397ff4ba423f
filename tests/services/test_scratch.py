"""Work folders: the same empty one for the same request key, a new one without a key."""

from __future__ import annotations

from pathlib import Path

from bot.services.scratch import empty_folder


def test_the_same_key_gets_its_folder_back_empty_and_no_key_a_new_one(tmp_path: Path) -> None:
    base = tmp_path / "not-yet-made"
    first = empty_folder(base, "slack", "slack.diagnose:E1")
    (first / "rank0.log").write_text("what a crashed attempt wrote\n")
    again = empty_folder(base, "slack", "slack.diagnose:E1")
    assert again == first and list(again.iterdir()) == []
    assert empty_folder(base, "slack", "slack.diagnose:E2") != first
    fresh = [empty_folder(base, "job") for _ in range(2)]
    assert fresh[0] != fresh[1] and all(f.name.startswith("ncclbot-job-") for f in fresh)
