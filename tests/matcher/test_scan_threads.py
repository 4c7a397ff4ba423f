"""A diagnosis run from a thread (the server runs them in its own) scans with workers from a fork
server, since forking a threaded process is unsafe, and gets the same result."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from matcher.reading.read import iter_sources
from matcher.scanning import scan as scan_module
from matcher.scanning.catalog import load_catalog
from matcher.scanning.source_scan import _pack

CATALOG = load_catalog()


def _bundle(root: Path) -> Path:
    root.mkdir()
    for rank in range(4):
        init = f"comm 0x1 rank {rank} nranks 4 - Init COMPLETE"
        lines = [f"node-0:{4000 + rank}:{4000 + rank} [{rank}] NCCL INFO {init}\n"]
        lines += [f"[rank{rank}]: step {step} loss 2.0\n" for step in range(2000)]
        if rank == 2:
            lines.append("[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
        (root / f"rank{rank}.log").write_text("".join(lines))
    return root


def _scan(path: Path):
    result = scan_module.scan(iter_sources([str(path)]), CATALOG)
    return [_pack(o) for o in result.observations], [s.content_digest for s in result.sources]


def test_a_scan_from_a_thread_uses_a_fork_server_and_gets_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = _bundle(tmp_path / "bundle")
    monkeypatch.setenv("NCCLBOT_WORKERS", "1")
    alone = _scan(bundle)
    monkeypatch.setenv("NCCLBOT_WORKERS", "2")
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    methods: list[str] = []
    real_context = scan_module.Workers.__init__.__globals__["multiprocessing"].get_context

    def recording_context(method: str):  # type: ignore[no-untyped-def]
        methods.append(method)
        return real_context(method)

    monkeypatch.setattr(
        scan_module.Workers.__init__.__globals__["multiprocessing"], "get_context", recording_context
    )
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(_scan(bundle)))
    thread.start()
    thread.join(timeout=120)
    assert methods == ["forkserver"]
    assert got == [alone]
