"""NCCL_DEBUG=INFO floods: repeated setup lines of one process are skipped cheaply, nothing else is."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.pipeline import diagnose
from matcher.reading import read
from matcher.scanning import source_scan as scan_module
from matcher.scanning.catalog import load_catalog
from matcher.scanning.scan import CONTEXT_LINES_PER_HEAD, scan

CHANNELS = "".join(
    f"node-a:4100:4150 [0] NCCL INFO Channel {c % 32:02d}/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
    for c in range(CONTEXT_LINES_PER_HEAD * 8)
)
LATE_INIT = (
    "node-b:5200:5200 [1] NCCL INFO comm 0x7f51 rank 5 nranks 8 cudaDev 1 busId 2000 - Init COMPLETE\n"
)
LATE_WARN = "node-a:4100:4150 [0] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'\n"
OOM_RANK_5 = "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.\n"


def test_flood_of_one_process_keeps_other_writers_and_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "job.log"
    log.write_text(CHANNELS + LATE_INIT + LATE_WARN + OOM_RANK_5)
    parsed: list[int] = []
    real_parse = scan_module._Record.parse

    def counting_parse(raw: bytes, source: read.Source, lineno: int) -> object:
        parsed.append(lineno)
        return real_parse(raw, source, lineno)

    monkeypatch.setattr(scan_module._Record, "parse", staticmethod(counting_parse))
    result = scan(read.iter_sources([str(log)]), load_catalog())
    monkeypatch.undo()
    assert len(parsed) <= CONTEXT_LINES_PER_HEAD + 3  # the flood stopped costing parses
    signatures = [o.signature for o in result.observations]
    late_hosts = {o.line.host for o in result.observations if o.line.lineno > CONTEXT_LINES_PER_HEAD * 8}
    assert {"node-a", "node-b"} <= late_hosts  # the later process's init line and the same head's WARN
    assert len(signatures) < CONTEXT_LINES_PER_HEAD  # the flood itself left a handful of observations
    diagnosis = diagnose([str(log)]).diagnosis
    assert diagnosis.primary.class_id == "cuda/oom"
    assert diagnosis.culprit is not None and 5 in diagnosis.culprit.ranks
    assert "node-b" in diagnosis.culprit.hosts
