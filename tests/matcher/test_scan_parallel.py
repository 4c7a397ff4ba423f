"""Large plain files scanned in spans, by worker processes: the same result as one process, restarts
inside the file not lost to the sampling of setup floods, and the diagnosis of an unsplit scan."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.pipeline import diagnose
from matcher.reading.read import iter_sources
from matcher.scanning import scan as scan_module
from matcher.scanning.catalog import load_catalog
from matcher.scanning.source_scan import _pack

CATALOG = load_catalog()
RANKS = 64


def _nccl(rank: int, pid: int, comm: int, text: str) -> str:
    return f"node-{rank // 8:02d}:{pid}:{9000 + comm} [{rank % 8}] NCCL INFO {text}\n"


def _attempt(out: list[str], first_pid: int, comms: int, oom_rank: int | None) -> None:
    """One attempt of a job that creates a communicator every few steps (NCCL_DEBUG=INFO)."""
    for comm in range(comms):
        for rank in range(RANKS):
            pid = first_pid + rank
            if comm == 0:
                out.append(
                    _nccl(rank, pid, comm, f"Bootstrap : Using ib0:10.0.{rank // 8}.{rank % 8 + 1}<0>")
                )
            out.append(
                _nccl(
                    rank,
                    pid,
                    comm,
                    f"comm 0x{comm:02x}{rank:04x} rank {rank} nranks {RANKS} cudaDev "
                    f"{rank % 8} busId {rank % 8 + 1}0000 commId 0x{comm:x}1d - Init START",
                )
            )
            for channel in range(8):
                peer = (rank + 1) % RANKS
                out.append(
                    _nccl(
                        rank,
                        pid,
                        comm,
                        f"Channel {channel:02d}/0 : {rank}[{rank % 8}] -> "
                        f"{peer}[{peer % 8}] via P2P/IPC/read",
                    )
                )
            out.append(
                _nccl(
                    rank,
                    pid,
                    comm,
                    f"comm 0x{comm:02x}{rank:04x} rank {rank} nranks {RANKS} cudaDev "
                    f"{rank % 8} busId {rank % 8 + 1}0000 commId 0x{comm:x}1d - Init COMPLETE",
                )
            )
        for step in range(3):
            out.extend(f"[rank{r}]: step {comm * 3 + step} loss 2.{r:03d}\n" for r in range(RANKS))
    if oom_rank is not None:
        out.append(
            f"[rank{oom_rank}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        )


def _log(path: Path, restart: bool) -> Path:
    lines: list[str] = []
    _attempt(lines, 41000, comms=40, oom_rank=None if restart else 37)
    if restart:  # torchrun restarted every worker: new pids, and the new attempt is the one that failed
        _attempt(lines, 52000, comms=40, oom_rank=37)
    path.write_text("".join(lines))
    return path


def _scan(path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, spans: bool):
    monkeypatch.setenv("NCCLBOT_WORKERS", str(workers))
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan_module, "FIRST_SPAN_BYTES", 256 * 1024 if spans else 1 << 40)
    monkeypatch.setattr(scan_module, "SPAN_BYTES", 384 * 1024)
    result = scan_module.scan(iter_sources([str(path)]), CATALOG)
    summaries = [(s.name, s.lines, s.bytes, s.ranks_seen, s.content_digest) for s in result.sources]
    return [_pack(o) for o in result.observations], summaries, (result.stats.bytes, result.stats.lines)


@pytest.mark.parametrize("restart", [False, True], ids=["one-attempt", "restarted"])
def test_worker_processes_give_the_result_of_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restart: bool
) -> None:
    path = _log(tmp_path / "train.log", restart)
    assert path.stat().st_size > 6 * 384 * 1024  # several spans
    assert _scan(path, monkeypatch, 2, spans=True) == _scan(path, monkeypatch, 1, spans=True)


def test_processes_of_a_restart_deep_in_a_large_file_are_all_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _log(tmp_path / "train.log", restart=True)
    observations, _, _ = _scan(path, monkeypatch, 2, spans=True)
    # (signature, ..., pid) of the packed observations: every restarted process's init line is there
    inits = {o[13] for o in observations if o[0] == "nccl-comm-init-rank" and o[13] >= 52000}
    assert inits == {52000 + rank for rank in range(RANKS)}


def test_spans_give_the_diagnosis_of_an_unsplit_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _log(tmp_path / "train.log", restart=True)
    monkeypatch.setenv("NCCLBOT_WORKERS", "2")
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan_module, "SPAN_BYTES", 384 * 1024)
    monkeypatch.setattr(scan_module, "FIRST_SPAN_BYTES", 256 * 1024)
    split = diagnose([str(path)]).diagnosis
    monkeypatch.setattr(scan_module, "FIRST_SPAN_BYTES", 1 << 40)
    whole = diagnose([str(path)]).diagnosis
    assert split.primary.class_id == whole.primary.class_id == "cuda/oom"
    assert split.culprit == whole.culprit and split.culprit is not None and split.culprit.ranks == (37,)
    assert [e.to_json() for e in split.primary.evidence] == [e.to_json() for e in whole.primary.evidence]
