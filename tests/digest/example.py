"""The example digest of the README (docs/digest-example.txt and .png), from the seeded history of
tests/digest/history.py. `python docs/make_digest_example.py` writes the files; a test checks that
they are current."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bot.render.digest_charts import digest_chart_png
from bot.render.digest_text import digest_text
from bot.services.digest import build_digest
from bot.store import Store
from tests.digest.history import NOW, WEEK, seed_digest_history

DOCS = Path(__file__).resolve().parents[2] / "docs"
TEXT_FILE = DOCS / "digest-example.txt"
CHART_FILE = DOCS / "digest-example.png"
CHANNEL = "#ml-infra-oncall"


def render_example() -> tuple[str, bytes]:
    with tempfile.TemporaryDirectory() as folder, Store.open(f"sqlite:///{folder}/example.sqlite3") as store:
        seed_digest_history(store)
        _, digest = build_digest(store, week=WEEK, channel=CHANNEL, as_of=NOW, stale_days=7)
    return digest_text(digest), digest_chart_png(digest)


def write_example() -> None:
    text, chart = render_example()
    TEXT_FILE.write_text(text)
    CHART_FILE.write_bytes(chart)
