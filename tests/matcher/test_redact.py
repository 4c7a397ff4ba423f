"""Credentials echoed into logs never reach a diagnosis; ordinary log content stays readable."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.analysis.redact import MASK, redact
from matcher.pipeline import diagnose


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        (
            "export HF_TOKEN=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
            "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        ),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG"),
        ("using key AKIAIOSFODNN7EXAMPLE for s3://bucket", "AKIAIOSFODNN7EXAMPLE"),
        (
            "WANDB_API_KEY: 0123456789abcdef0123456789abcdef01234567",
            "0123456789abcdef0123456789abcdef01234567",
        ),
        ("curl -H 'Authorization: Bearer abcdefghijklmnop.qrstuv'", "abcdefghijklmnop.qrstuv"),
        ("connecting to postgresql://train:hunter2secret@db:5432/runs", "hunter2secret"),
        ("slack token xoxb-1234567890-abcdefghijkl", "xoxb-1234567890-abcdefghijkl"),
        ("password = 'correct horse battery'", "correct horse battery"),
        ("gh token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ],
)
def test_secrets_are_masked(line: str, secret: str) -> None:
    cleaned = redact(line)
    assert secret not in cleaned
    assert MASK in cleaned


@pytest.mark.parametrize(
    "line",
    [
        "gpu-node-017:2319:2390 [3] NCCL INFO comm 0x55d1c0e0 rank 3 nranks 16 cudaDev 3 - Init COMPLETE",
        "[rank0]: step 1200 | loss 2.31 | tokens/s 71313 | max_tokens: 4096",
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4817, OpType=ALLREDUCE)",
        "NET/IB : Got completion from peer 10.0.0.2<45678> with status=12 opcode=0 len=0 vendor err 129",
        "MASTER_ADDR=10.1.0.11 MASTER_PORT=29500 NCCL_SOCKET_IFNAME=ens5",
    ],
)
def test_ordinary_log_lines_are_untouched(line: str) -> None:
    assert redact(line) == line


def test_evidence_of_a_diagnosis_is_redacted(tmp_path: Path) -> None:
    log = tmp_path / "rank3.log"
    log.write_text(
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB "
        "(launched with HF_TOKEN=hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210)\n"
    )
    diagnosis = diagnose([str(log)]).diagnosis
    assert diagnosis.primary.class_id == "cuda/oom"
    quoted = " ".join(e.text for score in diagnosis.diagnoses for e in score.evidence)
    assert "CUDA out of memory" in quoted
    assert "hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210" not in quoted
