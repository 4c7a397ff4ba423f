"""Terminal rendering of a diagnosis: each quoted line once, hostile text inert."""

from __future__ import annotations

import io

from rich.console import Console

from bot.render.diagnosis_text import render_diagnosis
from matcher.model import ClassScore, Culprit, Diagnosis, Evidence, Stats

XID = "gpu-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=812, name=python3, GPU has fallen off the bus."


def _render(diagnosis: Diagnosis) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    render_diagnosis(console, diagnosis)
    return console.export_text()


def test_a_line_quoted_by_two_signatures_is_shown_once() -> None:
    evidence = (
        Evidence("kernel.log", 1, XID, "xid-line"),
        Evidence("kernel.log", 1, XID, "gpu-fallen-off-bus"),
        Evidence("rank3.log", 9, "NCCL WARN Cuda failure 'unspecified launch failure'", "nccl-cuda-failure"),
    )
    diagnosis = Diagnosis(
        (ClassScore("hardware/gpu-xid", 0.95, "GPU fault", evidence),),
        Culprit((3,), ("gpu-7",), "host gpu-7 logged Xid 79"),
        "collective-timeout",
        Stats(bytes=10, lines=2, ranks=4),
    )
    out = _render(diagnosis)
    assert out.count("fallen off the bus") == 1
    assert "kernel.log:1" in out and "rank3.log:9" in out
    assert "rank 3 on gpu-7" in out
