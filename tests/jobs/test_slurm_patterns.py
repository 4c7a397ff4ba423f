"""Slurm file-name patterns: known symbols replaced exactly, per-node/per-task ones matched by '*'."""

from __future__ import annotations

import pytest

from bot.jobs.slurm.patterns import NO_ARRAY_TASK, PatternFields, expand

JOB = PatternFields(job_id="1234", job_name="train llama", user="alice", first_node="gpu-node-017")
ARRAY_TASK = PatternFields(
    job_id="1241", job_name="sweep", user="bob", array_job_id="1234", array_task_id="7"
)


@pytest.mark.parametrize(
    ("pattern", "fields", "exact"),
    [
        ("/logs/%x-%j.out", JOB, "/logs/train llama-1234.out"),
        ("/logs/%u/%8j.out", JOB, "/logs/alice/00001234.out"),
        ("/logs/%A_%a.out", ARRAY_TASK, "/logs/1234_7.out"),
        ("/logs/%A_%a.out", JOB, f"/logs/1234_{NO_ARRAY_TASK}.out"),
        ("/logs/100%%-%j", JOB, "/logs/100%-1234"),
        ("/logs/%N.out", JOB, "/logs/gpu-node-017.out"),
        ("/logs/\\%j.out", JOB, "/logs/%j.out"),
        ("/logs/[weird]*%j.out", JOB, "/logs/[weird]*1234.out"),
    ],
)
def test_known_symbols_are_replaced_exactly(pattern: str, fields: PatternFields, exact: str) -> None:
    assert expand(pattern, fields).exact == exact


@pytest.mark.parametrize(
    ("pattern", "glob"),
    [
        ("/logs/%j-%t.out", "/logs/1234-*.out"),
        ("/logs/%j-%n-%N.out", "/logs/1234-*-*.out"),
        ("/logs/[x]%j-%t.out", "/logs/[[]x]1234-*.out"),
    ],
)
def test_per_node_and_per_task_symbols_become_wildcards(pattern: str, glob: str) -> None:
    expanded = expand(pattern, JOB)
    assert expanded.glob == glob
    if "%t" in pattern or "%n" in pattern:
        assert expanded.exact is None
