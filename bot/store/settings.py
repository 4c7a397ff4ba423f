"""Where the store lives and how incidents are grouped: read from the environment, nothing else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

import platformdirs

DATABASE_URL_ENV = "NCCLBOT_DATABASE_URL"

# Occurrences of one fingerprint closer together than this join the same incident: a job that keeps
# restarting onto the same bad node over a weekend is one incident with many occurrences, while the same
# fault a week later is a recurrence worth its own Slack thread.
INCIDENT_WINDOW = timedelta(hours=72)

# The period the recurrence line counts over ("3rd time on gpu-node-017 in 7 days").
RECURRENCE_DAYS = 7

# After a resolution with a fix, a recurrence of the fingerprint within this period means the fix did
# not hold.
FIX_HORIZON = timedelta(days=14)


def default_sqlite_path() -> Path:
    """`ncclbot.sqlite3` in the user's data directory (e.g. ~/.local/share/ncclbot/ on Linux)."""
    return Path(platformdirs.user_data_dir("ncclbot", appauthor=False)) / "ncclbot.sqlite3"


def normalise_url(url: str) -> str:
    """Pin PostgreSQL URLs to psycopg 3, the driver the project ships (SQLAlchemy would pick psycopg2)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def database_url(url: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The URL to open: the argument, else NCCLBOT_DATABASE_URL, else the default SQLite file."""
    env = os.environ if environ is None else environ
    chosen = url or env.get(DATABASE_URL_ENV, "").strip()
    if chosen:
        return normalise_url(chosen)
    return f"sqlite:///{default_sqlite_path()}"
