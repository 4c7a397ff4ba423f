"""The probe for real: 4 local ranks with Gloo on CPU, correct sums at every size, nccl-tests'
bandwidth arithmetic, the JSON contract, and the injected faults (a rank past the deadline, a rank
with a corrupted result)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from probes.result import ProbeResult, find_result_line

from .helpers import ROOT, SMALL_SIZES, probe_env, run_probe


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> tuple[ProbeResult, dict]:
    tmp = tmp_path_factory.mktemp("healthy")
    result, done = run_probe(tmp, "--nproc", "4", "--sizes", SMALL_SIZES, "--iters", "2", "--deadline", "60")
    assert done.returncode == 0, done.stderr[-3000:]
    raw = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    return result, raw


def test_four_ranks_sum_correctly_at_every_size(healthy: tuple[ProbeResult, dict]) -> None:
    result, _ = healthy
    assert result.verdict == "healthy", result.reasons
    assert result.backend == "gloo"
    assert result.world_size == 4
    assert [r.bytes for r in result.results] == [8, 1024, 65536, 262144]
    assert all(r.correct and r.wrong_ranks == [] for r in result.results)
    assert [r.rank for r in result.ranks] == [0, 1, 2, 3]
    assert all(r.arrived and r.finished and len(r.size_time_us) == 4 for r in result.ranks)


def test_bandwidth_follows_nccl_tests_definitions(healthy: tuple[ProbeResult, dict]) -> None:
    result, _ = healthy
    for size in result.results:
        slowest = max(rank.size_time_us[result.results.index(size)] for rank in result.ranks)
        assert size.time_us == pytest.approx(slowest)
        assert size.algbw_gbps == pytest.approx(size.bytes / (size.time_us * 1e-6) / 1e9)
        assert size.busbw_gbps == pytest.approx(size.algbw_gbps * 2 * 3 / 4)
    assert result.peak_busbw_gbps == pytest.approx(max(s.busbw_gbps for s in result.results))


def test_ring_pass_covers_every_hop(healthy: tuple[ProbeResult, dict]) -> None:
    result, _ = healthy
    assert sorted((link.src, link.dst) for link in result.links) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert all(link.correct and link.gbps > 0 for link in result.links)


def test_json_document_has_the_contract_fields(healthy: tuple[ProbeResult, dict]) -> None:
    _, raw = healthy
    for key in ("verdict", "reasons", "backend", "world_size", "host", "results", "ranks", "checks"):
        assert key in raw
    assert set(raw["results"][0]) >= {"bytes", "time_us", "algbw_gbps", "busbw_gbps", "correct"}
    assert set(raw["ranks"][0]) >= {"rank", "time_us"}
    names = {c["name"] for c in raw["checks"]}
    assert {"interfaces", "shm", "memlock", "gpus", "xid", "ib-ports", "versions"} <= names
    assert all(c["status"] in {"pass", "warn", "fail", "skipped"} and c["evidence"] for c in raw["checks"])
    # Without nvidia-smi the GPU checks say so instead of passing.
    gpus = next(c for c in raw["checks"] if c["name"] == "gpus")
    assert gpus["status"] in {"skipped", "pass", "fail"}


def test_a_rank_that_never_arrives_is_named_within_the_deadline(tmp_path: Path) -> None:
    started = time.monotonic()
    result, done = run_probe(
        tmp_path,
        "--nproc", "4", "--sizes", "8,1K", "--iters", "1", "--deadline", "8", "--no-checks",
        NCCLBOT_PROBE_FAULT="delay:2:120",
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.verdict == "failed"
    assert result.reasons[0] == "rank 2 never arrived before the 8 s deadline"
    assert result.missing_ranks == [2]
    assert done.returncode == 1
    # The deadline holds: nowhere near the 120 s the rank sleeps.
    assert elapsed < 30


def test_a_corrupted_rank_is_named(tmp_path: Path) -> None:
    result, done = run_probe(
        tmp_path,
        "--nproc", "4", "--sizes", "8,1K", "--iters", "1", "--deadline", "40", "--no-checks",
        NCCLBOT_PROBE_FAULT="corrupt:1",
    )  # fmt: skip
    assert result.verdict == "failed"
    assert any(reason.startswith("wrong result on rank 1") for reason in result.reasons)
    assert all(size.wrong_ranks == [1] and not size.correct for size in result.results)
    # The ring pass points at the hop into the bad rank.
    assert [(hop.src, hop.dst) for hop in result.links if not hop.correct] == [(0, 1)]
    assert done.returncode == 1


def test_when_rank_0_never_arrives_the_spawner_names_it(tmp_path: Path) -> None:
    """Rank 0 hosts the coordinator, so here the spawner's own account (progress lines) is the result."""
    result, done = run_probe(
        tmp_path,
        "--nproc", "2", "--sizes", "8", "--iters", "1", "--deadline", "4", "--no-checks",
        NCCLBOT_PROBE_FAULT="delay:0:120",
    )  # fmt: skip
    assert result.verdict == "failed"
    assert result.reasons[0] == "rank 0 never arrived before the 4 s deadline"
    assert [r.rank for r in result.ranks if r.arrived] == [1]
    assert "rank 0 ended itself after the deadline without a result" in result.reasons
    assert done.returncode == 1


def test_a_rank_stalled_before_a_collective_is_named_the_straggler(tmp_path: Path) -> None:
    result, done = run_probe(
        tmp_path,
        "--nproc", "3", "--sizes", "8,1K", "--iters", "1", "--deadline", "8", "--no-checks",
        NCCLBOT_PROBE_FAULT="hang:1:120",
    )  # fmt: skip
    assert result.verdict == "failed"
    assert result.reasons[0].startswith("rank 1 (")
    assert "is the straggler: stuck at 'init' while other ranks reached 'allreduce 8 B'" in result.reasons[0]
    assert all(rank.arrived and not rank.finished for rank in result.ranks)
    assert done.returncode == 1


def test_runs_under_torchrun_with_its_agent_store(tmp_path: Path) -> None:
    """Under torchrun the agent serves the rendezvous store; the probe joins it instead of hosting one."""
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "-m", "probes.allreduce",
         "--json", "--sizes", "8,1K", "--iters", "1", "--no-checks", "--deadline", "40"],
        cwd=ROOT, env=probe_env(tmp_path), capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = find_result_line(done.stdout)
    assert result is not None and result.verdict == "healthy"
    assert result.world_size == 2 and all(size.correct for size in result.results)
