"""A culprit's host is named only when the logs tie the rank to it: one visible host is not a proof."""

from __future__ import annotations

from pathlib import Path

from matcher.pipeline import diagnose

NODE_A_INIT = "".join(
    f"node-a:{4100 + r}:{4100 + r} [{r}] NCCL INFO comm 0x7f{r:02x} rank {r} nranks 8 cudaDev {r} "
    f"busId {r + 1}000 - Init COMPLETE\n"
    for r in range(4)
)
OOM_RANK_6 = (
    "[rank6]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. "
    "GPU 2 has a total capacity of 79.10 GiB of which 300.00 MiB is free.\n"
)


def _culprit(tmp_path: Path, text: str) -> tuple[list[int], list[str]]:
    log = tmp_path / "job.log"
    log.write_text(text)
    culprit = diagnose([str(log)]).diagnosis.culprit
    assert culprit is not None
    return list(culprit.ranks), list(culprit.hosts)


def test_rank_outside_the_only_visible_node_gets_no_host(tmp_path: Path) -> None:
    # 8 ranks, only node-a's four NCCL init lines are in the bundle: rank 6 ran elsewhere.
    assert _culprit(tmp_path, NODE_A_INIT + OOM_RANK_6) == ([6], [])


def test_single_node_job_names_the_node(tmp_path: Path) -> None:
    init = NODE_A_INIT.replace("nranks 8", "nranks 4")
    oom = OOM_RANK_6.replace("rank6", "rank3")
    text = "".join(line for line in init.splitlines(keepends=True) if " rank 3 " not in line) + oom
    assert _culprit(tmp_path, text) == ([3], ["node-a"])
