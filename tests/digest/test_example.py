"""The README's example digest is what the code produces from the seeded history today."""

from __future__ import annotations

from tests.conftest import ROOT
from tests.digest.example import CHART_FILE, TEXT_FILE, render_example
from tests.digest.test_render import png_size


def test_the_readme_example_digest_is_current() -> None:
    text, chart = render_example()
    assert TEXT_FILE.read_text() == text, "run: python docs/make_digest_example.py"
    assert f"```\n{text}```" in (ROOT / "README.md").read_text()
    assert png_size(CHART_FILE.read_bytes()) == png_size(chart) == (1200, 1000)
