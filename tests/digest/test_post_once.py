"""The digest is posted at most once per (channel, ISO week): a second post that week, a concurrent
one, or one after a crash finds the week's claim in the store. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from bot.services.digest import post_digest
from bot.services.outlet import InMemoryOutlet, Message, MessageRef
from bot.services.posting import post_once
from bot.store import Store
from tests.digest.history import NOW, WEEK, seed_digest_history
from tests.digest.outlets import FileOutlet
from tests.digest.test_render import png_size
from tests.server.helpers import ROOT, clean_environment

CHANNEL = "C0DIGEST"


def _post(store: Store, outlet: object, *, claimant: str = "replica-a", minutes: float = 0) -> str:
    result = post_digest(
        store,
        outlet,  # type: ignore[arg-type]
        channel=CHANNEL,
        week=WEEK,
        as_of=NOW,
        stale_days=7,
        claimant=claimant,
        now=NOW + timedelta(minutes=minutes),
    )
    return result.outcome


def _posts_counted(outcome: str) -> float:
    return REGISTRY.get_sample_value("ncclbot_digest_posts_total", {"outcome": outcome}) or 0.0


def test_a_second_post_the_same_week_posts_nothing(store: Store) -> None:
    seed_digest_history(store)
    outlet = InMemoryOutlet()
    posted_before, repeated_before = _posts_counted("posted"), _posts_counted("already-posted")
    assert _post(store, outlet) == "posted"
    assert _post(store, outlet, claimant="replica-b", minutes=60) == "already-posted"
    assert (_posts_counted("posted"), _posts_counted("already-posted")) == (
        posted_before + 1,
        repeated_before + 1,
    )
    [posted] = outlet.top_level(CHANNEL)
    assert posted.key == f"digest:{CHANNEL}:{WEEK}"
    assert "NCCL incident digest 2026-W48: 7 occurrences" in posted.message.text
    [chart] = posted.message.files  # the outlet puts files into the message's thread
    assert chart.filename == "ncclbot-digest-2026-W48.png"
    assert png_size(chart.content) == (1200, 1000)
    claim = store.digest_claim(CHANNEL, WEEK)
    assert claim is not None and claim.slack_ts == posted.ref.ts


def test_another_channel_or_week_gets_its_own_digest(store: Store) -> None:
    outlet = InMemoryOutlet()
    assert _post(store, outlet) == "posted"
    other = post_digest(
        store, outlet, channel="C0OTHER", week=WEEK, as_of=NOW, stale_days=7, claimant="a", now=NOW
    )
    next_week = post_digest(
        store,
        outlet,
        channel=CHANNEL,
        week="2026-W49",
        as_of=NOW + timedelta(days=7),
        stale_days=7,
        claimant="a",
        now=NOW + timedelta(days=7),
    )
    assert (other.outcome, next_week.outcome) == ("posted", "posted")
    assert len(outlet.posted) == 3


class FailingOnce(InMemoryOutlet):
    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def post(
        self, channel: str, message: Message, *, thread: MessageRef | None = None, key: str | None = None
    ) -> MessageRef:
        if not self.failed:
            self.failed = True
            raise ConnectionError("slack is down")
        return super().post(channel, message, thread=thread, key=key)


def test_a_failed_post_gives_the_week_back(store: Store) -> None:
    outlet = FailingOnce()
    with pytest.raises(ConnectionError):
        _post(store, outlet)
    assert store.digest_claim(CHANNEL, WEEK) is None
    assert _post(store, outlet, minutes=5) == "posted"
    assert len(outlet.posted) == 1


def test_a_claim_left_by_a_dead_replica_is_taken_over_after_its_lease(store: Store) -> None:
    store.claim_digest(CHANNEL, WEEK, as_of=NOW, claimant="dead", lease=timedelta(minutes=10), now=NOW)
    outlet = InMemoryOutlet()
    assert _post(store, outlet, minutes=5) == "in-progress"
    assert outlet.posted == []
    assert _post(store, outlet, minutes=11) == "posted"
    claim = store.digest_claim(CHANNEL, WEEK)
    assert claim is not None and claim.claimed_by == "replica-a" and claim.posted_at is not None
    # The dead replica waking up cannot mark the week as its own.
    assert not store.mark_digest_posted(claim.id, "dead", "1.1", now=NOW + timedelta(minutes=12))


def test_three_concurrent_cli_posts_post_one_digest(database_url: str, tmp_path: Path) -> None:
    with Store.open(database_url) as store:
        seed_digest_history(store)
    outlet_file = tmp_path / "posts.jsonl"
    start_at = time.time() + 4  # after every process has imported everything
    env = clean_environment({"SLACK_BOT_TOKEN": "xoxb-test", "NCCLBOT_DATABASE_URL": database_url})
    args = ["digest", "--post", "--channel", CHANNEL, "--as-of", "2026-11-29T12:00:00Z"]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.digest.post_process", str(outlet_file), str(start_at), *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0], outputs
    said = sorted(out.splitlines()[0].split(" the digest")[0] for out, _ in outputs)
    posted = [out for out, _ in outputs if out.startswith("posted the digest 2026-W48 to C0DIGEST")]
    assert len(posted) == 1, said
    assert all("not posted again" in out for out, _ in outputs if out not in posted)
    [post] = FileOutlet(outlet_file).posts()
    assert (post["channel"], post["files"]) == (CHANNEL, ["ncclbot-digest-2026-W48.png"])


def test_a_replica_that_died_after_posting_is_not_posted_over(store: Store) -> None:
    """The first replica posted (and recorded the message under the digest's key) but died before
    marking the week: the replica taking over finds the message instead of posting again."""
    dead_replicas_outlet, outlet = InMemoryOutlet(), InMemoryOutlet()  # two processes: nothing shared
    dead = store.claim_digest(CHANNEL, WEEK, as_of=NOW, claimant="dead", lease=timedelta(minutes=10), now=NOW)
    key = f"digest:{CHANNEL}:{WEEK}"
    first = post_once(dead_replicas_outlet, store, key, CHANNEL, Message(text="the digest"))
    assert dead.won and _post(store, outlet, minutes=11) == "posted"
    assert outlet.posted == []
    claim = store.digest_claim(CHANNEL, WEEK)
    assert claim is not None and claim.slack_ts == first.ts
