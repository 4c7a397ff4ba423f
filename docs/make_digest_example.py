"""Regenerate the README's example digest: docs/digest-example.txt and docs/digest-example.png.

Run from the repository root: `.venv/bin/python docs/make_digest_example.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.digest.example import CHART_FILE, TEXT_FILE, write_example

if __name__ == "__main__":
    write_example()
    print(f"wrote {TEXT_FILE} and {CHART_FILE}")
