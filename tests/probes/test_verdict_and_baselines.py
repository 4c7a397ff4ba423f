"""Verdict rules, nccl-tests arithmetic, per-SKU baselines and fleet history (pure functions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.baselines import (
    Baseline,
    BaselineError,
    compare_with_baseline,
    compare_with_history,
    find_baseline,
    load_baselines,
    peak_busbw,
)
from probes.result import (
    Check,
    LinkResult,
    ProbeResult,
    RankResult,
    ResultError,
    SizeResult,
    algbw_gbps,
    allreduce_busbw_gbps,
    find_result_line,
)
from probes.verdict import decide


def test_busbw_is_algbw_times_2_n_minus_1_over_n() -> None:
    assert allreduce_busbw_gbps(100.0, 8) == pytest.approx(175.0)
    assert allreduce_busbw_gbps(100.0, 2) == pytest.approx(100.0)
    assert allreduce_busbw_gbps(100.0, 1) == 0.0
    assert algbw_gbps(1 << 30, 0.01) == pytest.approx(107.374182)


def base_result(**kwargs: object) -> ProbeResult:
    result = ProbeResult("healthy", [], "nccl", 8, "gpu01", ranks=[RankResult(r) for r in range(8)])
    for key, value in kwargs.items():
        setattr(result, key, value)
    return result


def test_all_good_is_healthy() -> None:
    result = base_result(results=[SizeResult(8, 10.0, 0.0, 0.0, True)])
    decide(result)
    assert (result.verdict, result.reasons) == ("healthy", [])


def test_missing_rank_fails_and_comes_first() -> None:
    ranks = [RankResult(0, error="Connect timeout"), RankResult(1, arrived=False, finished=False)]
    result = base_result(ranks=ranks)
    decide(result, deadline_s=30)
    assert result.verdict == "failed"
    assert result.reasons == [
        "rank 1 never arrived before the 30 s deadline",
        "rank 0 failed: Connect timeout",
    ]


def test_wrong_results_name_the_rank_and_sizes() -> None:
    sizes = [SizeResult(8, 1.0, 0.0, 0.0, False, [3]), SizeResult(1024, 1.0, 0.0, 0.0, False, [3])]
    result = base_result(results=sizes)
    decide(result)
    assert result.reasons == ["wrong result on rank 3 at 8 B..1 KiB (2 sizes)"]


def test_slow_ring_hop_and_failed_check_degrade() -> None:
    links = [LinkResult(i, (i + 1) % 4, 1 << 20, 10.0, 100.0, True) for i in range(4)]
    links[2] = LinkResult(2, 3, 1 << 20, 10.0, 20.0, True)
    result = base_result(links=links, checks=[Check("shm", "fail", "/dev/shm is 64 MiB", host="gpu01")])
    decide(result)
    assert result.verdict == "degraded"
    assert result.reasons[0].startswith("slow ring hop rank 2 -> rank 3")
    assert result.reasons[1] == "node check shm failed on gpu01: /dev/shm is 64 MiB"
    on_cpu = base_result(links=links, backend="gloo")
    decide(on_cpu)
    assert on_cpu.verdict == "healthy"


def test_h100_baseline_degrades_below_400() -> None:
    table = load_baselines()
    baseline = find_baseline("NVIDIA H100 80GB HBM3", 8, table)
    assert baseline is not None and baseline.min_busbw_gbps == 400.0
    assert find_baseline("NVIDIA H200", 8, table) == baseline
    pcie = find_baseline("NVIDIA H100 PCIe", 8, table)
    assert pcie is not None and pcie.min_busbw_gbps == 35.0
    assert find_baseline("NVIDIA H100 80GB HBM3", 4, table) is None
    big = 1 << 30
    assert peak_busbw([(8, 999.0), (big, 212.0)], baseline.min_bytes) == 212.0
    assert compare_with_baseline(212.0, baseline) is not None
    assert "53%" in (compare_with_baseline(212.0, baseline) or "")
    assert compare_with_baseline(455.0, baseline) is None
    assert compare_with_baseline(None, baseline) is None


def test_baselines_file_overrides_and_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "baselines.json"
    path.write_text(json.dumps([{"device": "MI300", "gpus": 8, "min_busbw_gbps": 300.0}]))
    assert load_baselines(path) == (Baseline("MI300", 8, 300.0),)
    path.write_text("not json")
    with pytest.raises(BaselineError, match="cannot use baselines file"):
        load_baselines(path)


def test_history_needs_enough_runs_and_a_real_drop() -> None:
    assert compare_with_history(100.0, [450.0, 460.0]) is None
    assert compare_with_history(440.0, [450.0, 460.0, 470.0]) is None
    reason = compare_with_history(300.0, [450.0, 460.0, 470.0])
    assert reason is not None and "median 460.0" in reason


def test_result_json_round_trip_and_validation() -> None:
    result = base_result(results=[SizeResult(8, 1.0, 2.0, 3.5, True)], checks=[Check("shm", "pass", "ok")])
    again = ProbeResult.from_json(result.to_json())
    assert again == result
    assert find_result_line("noise\n" + result.to_json() + "\ntrailer") == result
    with pytest.raises(ResultError, match="unknown verdict"):
        ProbeResult.from_dict({**result.to_dict(), "verdict": "fine"})
    with pytest.raises(ResultError, match="lacks 'host'"):
        ProbeResult.from_dict({k: v for k, v in result.to_dict().items() if k != "host"})


def test_the_rank_behind_the_others_is_the_straggler() -> None:
    ranks = [
        RankResult(0, host="a", finished=False, phase="allreduce 1 MiB", step=9),
        RankResult(1, host="b", finished=False, phase="allreduce 64 KiB", step=6),
        RankResult(2, host="c", finished=False, phase="allreduce 1 MiB", step=9),
    ]
    result = base_result(ranks=ranks)
    decide(result)
    assert result.reasons == [
        "rank 1 (b) is the straggler: stuck at 'allreduce 64 KiB'"
        " while other ranks reached 'allreduce 1 MiB'",
        "rank 0 (a) did not finish (last seen: allreduce 1 MiB)",
        "rank 2 (c) did not finish (last seen: allreduce 1 MiB)",
    ]
