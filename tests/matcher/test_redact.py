"""Credentials echoed into logs never reach a diagnosis; ordinary log content stays readable."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from matcher.analysis.redact import MASK, redact, redact_diagnosis, rules
from matcher.model import ClassScore, Culprit, Diagnosis, Evidence, Stats
from matcher.pipeline import diagnose

MASKED = [(rule.id, text, secret) for rule in rules() for text, secret in rule.mask_examples]
KEPT = [(rule.id, text) for rule in rules() for text in rule.keep_examples]


@pytest.mark.parametrize(("rule", "line", "secret"), MASKED, ids=[f"{r}:{t[:30]}" for r, t, _ in MASKED])
def test_every_rule_masks_its_examples(rule: str, line: str, secret: str) -> None:
    assert secret in line, f"{rule}: the example must contain its secret"
    cleaned = redact(line)
    assert secret not in cleaned
    assert MASK in cleaned


@pytest.mark.parametrize(("rule", "line"), KEPT, ids=[f"{r}:{t[:30]}" for r, t in KEPT])
def test_every_rule_leaves_ordinary_lines_alone(rule: str, line: str) -> None:
    assert redact(line) == line


@pytest.mark.parametrize(
    "line",
    [
        "gpu-node-017:2319:2390 [3] NCCL INFO comm 0x55d1c0e0 rank 3 nranks 16 cudaDev 3 - Init COMPLETE",
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4817, OpType=ALLREDUCE)",
        "NET/IB : Got completion from peer 10.0.0.2<45678> with status=12 opcode=0 len=0 vendor err 129",
        "[E socket.cpp:957] [c10d] The client socket has timed out while trying to connect to tcp://10.0.0.1:29500",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 3; 79.15 GiB total)",
    ],
)
def test_nccl_and_torch_lines_are_untouched(line: str) -> None:
    assert redact(line) == line


def test_every_secret_in_one_line_goes_at_once() -> None:
    """The sweep's line: a dozen credential formats side by side, none may survive."""
    secrets = {
        "xapp": "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef",
        "aws": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "redis": "hunter2",
        "at-sign": "p@ss",
        "azure": "abcdEFGH1234567890abcdEFGH1234567890abcdEFGH12==",
        "sas": "AbCdEf0123456789%2Bxyz%3D",
        "gcp": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
        "key-id": "0123456789abcdef0123456789abcdef01234567",
        "flag": "s3cr3t",
        "header": "k3yv4lue",
        "stripe": "sk_live_51Habcdefghijklmnopqrstuvwx",
        "npm": "npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "short": "abc",
    }
    s = secrets
    line = (
        f"[rank3]: CUDA out of memory app={s['xapp']} aws {s['aws']} redis://:{s['redis']}@redis:6379 "
        f"postgres://u:{s['at-sign']}@db/x AccountName=a;AccountKey={s['azure']};EndpointSuffix=x "
        f"https://a.blob.core.windows.net/c?sv=2020&sig={s['sas']}&se=2030 {s['gcp']} "
        f'"private_key_id": "{s["key-id"]}" --password {s["flag"]} X-Api-Key: {s["header"]} '
        f"{s['stripe']} {s['npm']} PASSWORD={s['short']}"
    )
    cleaned = redact(line)
    survivors = [name for name, secret in secrets.items() if secret in cleaned]
    assert survivors == []
    assert cleaned.startswith("[rank3]: CUDA out of memory")


@pytest.mark.parametrize(
    "tail",
    ["ghp_abcdefghij", "xoxb-12345", "hf_aBcDe", "redis://:hunt", "eyJhbGciOiJIUzI1Ni", "AKIAIOSF"],
)
def test_a_secret_cut_short_at_the_end_of_a_text_is_still_masked(tail: str) -> None:
    """Texts may reach redaction already capped by the reader: what is left of a token still goes."""
    cleaned = redact(f"launch failed, env: {tail}")
    assert cleaned == f"launch failed, env: {MASK}" or tail.split("//")[-1] not in cleaned


def test_a_port_at_the_end_of_a_line_is_not_mistaken_for_a_password() -> None:
    assert redact("connect to tcp://master-0:29500") == "connect to tcp://master-0:29500"


def test_token_across_the_evidence_limit_is_redacted_before_the_cut(tmp_path: Path) -> None:
    """The excerpt keeps 400 characters: a token starting at 380 must not survive as a 20-character
    stub that no longer looks like a token."""
    token = "ghp_" + "A1b2C3d4E5" * 4
    padding = "x" * (400 - len("[rank3]: CUDA out of memory. ") - 20)
    log = tmp_path / "rank3.log"
    log.write_text(f"[rank3]: CUDA out of memory. {padding}{token} tail\n")
    diagnosis = diagnose([str(log)]).diagnosis
    quoted = [e.text for score in diagnosis.diagnoses for e in score.evidence]
    assert quoted and all(len(text) <= 400 for text in quoted)
    assert not any(token[:12] in text for text in quoted)


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


def test_extracted_values_and_culprit_hosts_are_redacted() -> None:
    diagnosis = Diagnosis(
        diagnoses=(ClassScore("network/ib-rdma", 0.9, "IB", (Evidence("a.log", 1, "x", "sig"),)),),
        culprit=Culprit(ranks=(1,), hosts=("https://u:pw1234@10.0.0.2",), reason="peer https://u:pw1234@h"),
        symptom=None,
        stats=Stats(),
        facts={"peer": "https://u:pw1234@10.0.0.2", "timeout_ms": 600000},
    )
    cleaned = redact_diagnosis(diagnosis)
    assert "pw1234" not in repr(cleaned)
    assert cleaned.facts["timeout_ms"] == 600000
    assert cleaned.facts["peer"] == f"https://u:{MASK}@10.0.0.2"


def test_a_pathological_line_is_masked_whole_rather_than_shown() -> None:
    hostile = "password=" + "a" * 10 + ("://:" * 20000)
    cleaned = redact(hostile)
    assert "aaaaaaaaaa" not in cleaned


def test_real_log_lines_and_signature_examples_come_out_unchanged(shared_dir: Path) -> None:
    """False positives hide evidence: none of the corpus' lines or the catalog's examples holds a secret."""
    lines = [
        line
        for log in sorted((shared_dir / "corpus-dev").glob("*.log"))
        for line in log.read_text(errors="replace").splitlines()
    ]
    for path in sorted((Path(__file__).parents[2] / "matcher" / "signatures").glob("*.toml")):
        for signature in tomllib.loads(path.read_text()).get("signature", []):
            lines += signature.get("match", []) + signature.get("no_match", [])
    assert len(lines) > 1000
    assert [line for line in lines if redact(line) != line] == []
