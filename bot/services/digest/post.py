"""Posting the weekly digest exactly once per (channel, ISO week), whatever the number of replicas
and restarts: claim the week's row in the store, then post, then mark it posted. The claim decides who
posts; `post_once` and its idempotency key cover a crash between the post and the mark (the replica
that takes the week over finds the message instead of posting it again)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from bot import metrics
from bot.model.digest import Digest
from bot.render.digest_blocks import digest_blocks, digest_fallback
from bot.render.digest_charts import digest_chart_png
from bot.services.digest.compose import compose
from bot.services.digest.figures import gather
from bot.services.digest.week import iso_week, latest_slot
from bot.services.outlet import FileUpload, Message, MessageRef, Outlet
from bot.services.posting import post_once
from bot.settings import DigestTarget

log = logging.getLogger("ncclbot.digest")

# A claim older than this without a post is taken to be from a replica that died mid-post.
LEASE = timedelta(minutes=10)

Outcome = Literal["posted", "already-posted", "in-progress"]


@dataclass(frozen=True, slots=True)
class DigestResult:
    """`retry_at`: when an `in-progress` claim of another replica may be taken over if it never posts."""

    outcome: Outcome
    channel: str
    week: str
    ref: MessageRef | None = None
    retry_at: datetime | None = None


def build_digest(
    store: Any, *, week: str, channel: str | None, as_of: datetime, stale_days: int
) -> tuple[dict[str, Any], Digest]:
    """The figures (`ncclbot digest --preview --json`) and the digest composed from them."""
    figures = gather(store, week=week, channel=channel, as_of=as_of, stale_days=stale_days)
    return figures, compose(figures)


def chart_filename(digest: Digest) -> str:
    return f"ncclbot-digest-{digest.week}.png"


def digest_message(digest: Digest) -> Message:
    chart = FileUpload(
        filename=chart_filename(digest),
        content=digest_chart_png(digest),
        title=f"Incidents per class per week and per node, to {digest.week}",
    )
    return Message(text=digest_fallback(digest), blocks=tuple(digest_blocks(digest)), files=(chart,))


def idempotency_key(channel: str, week: str) -> str:
    return f"digest:{channel}:{week}"


def post_digest(
    store: Any,
    outlet: Outlet,
    *,
    channel: str,
    week: str,
    as_of: datetime,
    stale_days: int,
    claimant: str,
    now: datetime,
    lease: timedelta = LEASE,
) -> DigestResult:
    """Post the digest of `week` (covering the 7 days to `as_of`) to `channel`, unless it was."""
    claim = store.claim_digest(channel, week, as_of=as_of, claimant=claimant, lease=lease, now=now)
    if claim.outcome == "posted":
        metrics.DIGEST_POSTS.labels(outcome="already-posted").inc()
        ts = claim.slack_ts
        return DigestResult("already-posted", channel, week, MessageRef(channel, ts) if ts else None)
    if not claim.won:
        metrics.DIGEST_POSTS.labels(outcome="in-progress").inc()
        return DigestResult("in-progress", channel, week, retry_at=now + lease)
    try:
        _, digest = build_digest(store, week=week, channel=channel, as_of=as_of, stale_days=stale_days)
        ref = post_once(outlet, store, idempotency_key(channel, week), channel, digest_message(digest))
    except BaseException:
        # Give the week back so that a retry, another replica or the next start can post it.
        store.release_digest(claim.id, claimant)
        metrics.DIGEST_POSTS.labels(outcome="error").inc()
        raise
    if not store.mark_digest_posted(claim.id, claimant, ref.ts, now=now):
        log.warning("digest %s for %s was posted after its claim had been taken over", week, channel)
    store.audit("ncclbot", "digest-posted", detail={"channel": channel, "week": week, "ts": ref.ts}, now=now)
    metrics.DIGEST_POSTS.labels(outcome="posted").inc()
    log.info("posted the digest %s to %s", week, channel)
    return DigestResult("posted", channel, week, ref)


def post_if_due(
    store: Any,
    outlet: Outlet,
    target: DigestTarget,
    *,
    now: datetime,
    grace: timedelta,
    stale_days: int,
    claimant: str,
    lease: timedelta = LEASE,
) -> DigestResult | None:
    """Post the digest of the channel's latest slot if that slot was at most `grace` ago (the cron
    firing, or a bot starting after it was down at the slot); None when no slot is due."""
    slot = latest_slot(target.slot, now)
    if now - slot > grace:
        return None
    return post_digest(
        store,
        outlet,
        channel=target.channel,
        week=iso_week(slot, target.slot.timezone),
        as_of=slot,
        stale_days=stale_days,
        claimant=claimant,
        now=now,
        lease=lease,
    )
