"""The weekly digest as a use case: figures from the store (`figures`), the digest composed from them
(`compose`, pure), its calendar (`week`), and posting it once per channel and ISO week (`post`). The
scheduler that calls it lives in bot/digest; the CLI calls it directly."""

from bot.services.digest.compose import compose
from bot.services.digest.figures import gather
from bot.services.digest.post import (
    LEASE,
    DigestResult,
    build_digest,
    chart_filename,
    digest_message,
    post_digest,
    post_if_due,
)
from bot.services.digest.week import iso_week, latest_slot

__all__ = [
    "LEASE",
    "DigestResult",
    "build_digest",
    "chart_filename",
    "compose",
    "digest_message",
    "gather",
    "iso_week",
    "latest_slot",
    "post_digest",
    "post_if_due",
]
