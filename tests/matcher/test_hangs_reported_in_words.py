"""A hang reported in words (a title or a sentence, often beside one unrelated line): the symptom
hang-reported, and where it hangs picks what an expert checks next (matcher/priors.toml, contexts hang-*).
A guess looks like one (low confidence, no culprit); a denial, a hedge or a fixed hang is no hang; and a
real error line, a quoted setting or NCCL's setup lines keep their own reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.analysis.priors import priors
from matcher.scanning.catalog import load_catalog
from tests.matcher.excerpts import class_ids, diagnose_text

MAX_GUESS = priors().max_confidence

# paste -> (first class, a class that must be among the first three)
STAGES = {
    "training hangs at the end of the first epoch\n": (
        "timeout/asymmetric-collectives",
        "timeout/rank0-only-work",
    ),
    "DDP training hangs during validation on 4 GPUs\n": (
        "timeout/rank0-only-work",
        "timeout/asymmetric-collectives",
    ),
    "FSDP job is stuck in dcp.save on 16 GPUs\n": (
        "timeout/rank0-only-work",
        "timeout/asymmetric-collectives",
    ),
    "./build/all_reduce_perf -b 8 -e 128M -f 2 -g 8 hangs, -g 2 works\n": (
        "nccl/nvls-or-algorithm",
        "p2p/pcie-acs",
    ),
    "Training is stuck at the first barrier\n": ("p2p/pcie-acs", "network/interface-selection"),
    "DDP hangs at init_process_group\n": ("rendezvous/store", "network/interface-selection"),
    "script hangs at destroy_process_group\n": (
        "timeout/asymmetric-collectives",
        "nccl/nvls-or-algorithm",
    ),
    "Multi-node training hangs, single node works fine\n": (
        "network/interface-selection",
        "config/version-mismatch",
    ),
    "多机训练初始化时卡住\n": ("rendezvous/store", "network/interface-selection"),
    "每个epoch结束时卡住\n": ("timeout/asymmetric-collectives", "timeout/rank0-only-work"),
    "学習の途中でフリーズする\n": ("unknown", "timeout/straggler-input"),
    "학습이 멈춥니다\n": ("unknown", "p2p/pcie-acs"),
    "GPU util 100% but nothing happens\n": ("unknown", "p2p/pcie-acs"),
}


@pytest.mark.parametrize("text", list(STAGES))
def test_where_a_hang_is_said_to_happen_ranks_the_classes_to_check_next(tmp_path: Path, text: str) -> None:
    first, listed = STAGES[text]
    d = diagnose_text(tmp_path, text)
    ranked = class_ids(d)
    assert d.symptom == "hang-reported"
    assert ranked[0] == first
    assert listed in ranked[:3]
    assert len(ranked) >= 3
    assert all(score.confidence <= MAX_GUESS for score in d.diagnoses)
    assert d.culprit is None


def test_a_hang_at_the_end_of_an_epoch_beside_an_unrelated_line_still_lists_asymmetric_collectives(
    tmp_path: Path,
) -> None:
    d = diagnose_text(
        tmp_path,
        "training hangs at the end of the first epoch\n"
        "gpu-a17:31377:31377 [0] NCCL INFO cudaDriverVersion 12040\n",
    )
    assert "timeout/asymmetric-collectives" in class_ids(d)[:3]
    assert d.primary.confidence <= MAX_GUESS


@pytest.mark.parametrize(
    "text",
    [
        "It no longer hangs after the upgrade\n",
        "the hang was fixed by upgrading NCCL to 2.21\n",
        "is it stuck?\n",
        "this may hang if ACS is on\n",
        "不再卡住了\n",
        "ハングしなくなりました\n",
        "더 이상 멈추지 않습니다\n",
    ],
)
def test_a_denied_hedged_or_fixed_hang_is_no_hang(tmp_path: Path, text: str) -> None:
    d = diagnose_text(tmp_path, text)
    assert d.symptom != "hang-reported"
    assert class_ids(d) == ["unknown"]


@pytest.mark.parametrize("title", list(STAGES))
def test_a_real_cuda_oom_line_beside_a_hang_title_decides(tmp_path: Path, title: str) -> None:
    oom = (
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
        "capacity of 79.10 GiB of which 1.12 GiB is free.\n"
    )
    d = diagnose_text(tmp_path, title + oom)
    assert d.primary.class_id == "cuda/oom"
    assert d.primary.confidence > MAX_GUESS


def test_a_hang_that_a_setting_removed_reads_as_the_setting_alone(tmp_path: Path) -> None:
    denied = diagnose_text(tmp_path, "It no longer hangs after setting NCCL_ALGO=Ring\n", name="denied.log")
    alone = diagnose_text(tmp_path, "NCCL_ALGO=Ring\n", name="alone.log")
    assert denied.symptom is None
    assert class_ids(denied) == class_ids(alone) != ["unknown"]


def test_a_quoted_setting_beside_a_hang_keeps_its_own_reading(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, "NCCL 2.19.4 hangs if NCCL_NVLS_ENABLE=1\n")
    assert d.primary.class_id == "nccl/nvls-or-algorithm"


def _setup_lines() -> str:
    return "".join(
        f"gpu-ws:4100{r}:4100{r} [{r}] NCCL INFO Channel 00/0 : {r}[{r}] -> {(r + 1) % 2}[{(r + 1) % 2}] "
        "via P2P/IPC\n"
        for r in range(2)
    )


def test_a_hang_title_over_nccl_setup_lines_keeps_the_setup_hang_suggestions(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, "DDP hangs on one machine\n" + _setup_lines())
    assert "p2p/pcie-acs" in class_ids(d)[:2]
    assert d.no_culprit_reason is not None and "NCCL initialisation" in d.no_culprit_reason


def test_a_hang_said_to_happen_after_training_started_is_no_setup_hang(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, "training hangs at the end of the first epoch\n" + _setup_lines())
    assert class_ids(d)[0] == "timeout/asymmetric-collectives"
    assert "NCCL initialisation" not in (d.no_culprit_reason or "")


def test_the_later_stages_priors_name_are_stage_signatures_of_the_catalog() -> None:
    ids = {s.id for s in load_catalog().signatures}
    assert priors().hang_stages_after_setup
    assert priors().hang_stages_after_setup <= ids
