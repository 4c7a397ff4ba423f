"""Which lines become residue: error-like, unrecognised by every signature, from the head and tail of
each input, within a fixed read budget; and the diagnosis that feeds them."""

from __future__ import annotations

import gzip
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.services import residue
from bot.services.diagnose import DiagnosisRequest, diagnose_and_record
from bot.services.residue import collect, list_templates
from bot.services.residue.collect import RecognisedLines, candidate_lines
from bot.store import Store
from matcher.scanning.catalog import load_catalog
from tests.conftest import ROOT

UNRECOGNISED = "[rank0]: RuntimeError: PMIx server died before the job finished (code 137)"
RECOGNISED = (
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 3 has a total"
    " capacity of 79.10 GiB of which 1.12 GiB is free."
)
HEALTHY = "[rank0]: step 1200 loss 2.113 lr 3.0e-4"


@pytest.fixture(scope="module")
def recognised() -> RecognisedLines:
    return RecognisedLines(load_catalog())


def texts(found: list[collect.CandidateLine]) -> list[str]:
    return [c.text for c in found]


def test_only_unrecognised_error_like_lines_are_candidates(
    tmp_path: Path, recognised: RecognisedLines
) -> None:
    log = tmp_path / "rank0.log"
    log.write_text("\n".join([HEALTHY, RECOGNISED, UNRECOGNISED, HEALTHY, UNRECOGNISED]) + "\n")
    [found] = candidate_lines([str(log)], recognised)
    assert found.text == "RuntimeError: PMIx server died before the job finished (code 137)"  # prefix peeled
    assert (found.raw, found.count, found.source) == (UNRECOGNISED, 2, str(log))


def test_compressed_logs_and_folders_are_read_like_the_diagnosis_reads_them(
    tmp_path: Path, recognised: RecognisedLines
) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "rank1.log.gz").write_bytes(gzip.compress(f"{UNRECOGNISED}\n".encode()))
    (tmp_path / "job" / "rank2.log").write_text("[rank2]: fatal: lost contact with the burst buffer\n")
    assert texts(candidate_lines([str(tmp_path / "job")], recognised)) == [
        "RuntimeError: PMIx server died before the job finished (code 137)",
        "fatal: lost contact with the burst buffer",
    ]


def test_only_the_head_and_tail_of_a_large_log_are_read(tmp_path: Path, recognised: RecognisedLines) -> None:
    filler = (HEALTHY + "\n") * (3 * collect.HEAD_BYTES // len(HEALTHY))
    log = tmp_path / "big.log"
    log.write_text(
        "error: head of the log\n"
        + filler
        + "error: middle of the log\n"
        + filler
        + "error: tail of the log\n"
    )
    assert log.stat().st_size > 2 * (collect.HEAD_BYTES + collect.TAIL_BYTES)
    assert texts(candidate_lines([str(log)], recognised)) == [
        "error: head of the log",
        "error: tail of the log",
    ]


def test_reading_stops_at_the_byte_budget(
    tmp_path: Path, recognised: RecognisedLines, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collect, "READ_BUDGET_BYTES", 1024)
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_text("error: first file\n" + (HEALTHY + "\n") * 100)
    second.write_text("error: second file\n")
    assert texts(candidate_lines([str(first), str(second)], recognised)) == ["error: first file"]


def test_stdin_is_not_read_twice(recognised: RecognisedLines) -> None:
    assert candidate_lines(["-"], recognised) == []


def _unknown_log(tmp_path: Path) -> Path:
    log = tmp_path / "rank0.log"
    log.write_text(f"[rank0]: starting\n{UNRECOGNISED}\n[rank0]: error: Slurm prolog failed on node-17\n")
    return log


def test_an_unknown_diagnosis_feeds_the_residue_once(tmp_path: Path, sqlite_url: str) -> None:
    request = DiagnosisRequest(paths=[str(_unknown_log(tmp_path))], database_url=sqlite_url)
    outcome = diagnose_and_record(request)
    assert outcome.diagnosis.primary.class_id == "unknown"
    diagnose_and_record(request)  # the same input again: a duplicate occurrence, mined once
    with Store.open(sqlite_url) as store:
        found = list_templates(store, days=1, now=datetime.now(UTC))
    assert sorted((t.template, t.occurrences, t.lines) for t in found) == [
        ("RuntimeError: PMIx server died before the job finished (code <NUM>)", 1, 1),
        ("error: Slurm prolog failed on <HOST>", 1, 1),
    ]


def test_a_confident_diagnosis_leaves_no_residue(sqlite_url: str) -> None:
    request = DiagnosisRequest(paths=[str(ROOT / "examples" / "oom-one-rank")], database_url=sqlite_url)
    outcome = diagnose_and_record(request)
    assert outcome.diagnosis.primary.class_id == "cuda/oom"
    assert not residue.should_mine(outcome.diagnosis)
    with Store.open(sqlite_url) as store:
        assert list_templates(store, days=1, now=datetime.now(UTC)) == []


def test_a_failing_residue_pass_never_costs_the_diagnosis(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise OSError("disk vanished\nsecond line")

    monkeypatch.setattr(residue, "record_residue", broken)
    with caplog.at_level(logging.WARNING, logger="ncclbot.services.diagnose"):
        outcome = diagnose_and_record(
            DiagnosisRequest(paths=[str(_unknown_log(tmp_path))], database_url=sqlite_url)
        )
    assert outcome.incident is not None and outcome.store_warning is None
    assert "unrecognised lines not mined: disk vanished" in caplog.text


def test_the_tail_of_a_plain_file_is_found_past_the_read_budget(
    tmp_path: Path, recognised: RecognisedLines, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain file is read at its end by seeking, however far past the read budget that end is."""
    monkeypatch.setattr(collect, "READ_BUDGET_BYTES", 6 * 1024**2)
    filler = (HEALTHY + "\n").encode() * (1024**2 // len(HEALTHY))
    log = tmp_path / "huge.log"
    with log.open("wb") as file:
        file.write(b"error: head of the log\n")
        for _ in range(20):
            file.write(filler)
        file.write(b"error: the very end of the log\n")
    assert log.stat().st_size > 3 * collect.READ_BUDGET_BYTES
    found = texts(candidate_lines([str(log)], recognised))
    assert found == ["error: head of the log", "error: the very end of the log"]


def test_a_compressed_log_is_read_on_to_its_tail_within_the_budget(
    tmp_path: Path, recognised: RecognisedLines
) -> None:
    filler = (HEALTHY + "\n") * (3 * collect.HEAD_BYTES // len(HEALTHY))
    log = tmp_path / "rank0.log.gz"
    log.write_bytes(gzip.compress(f"error: head\n{filler}error: middle\n{filler}error: tail\n".encode(), 1))
    assert texts(candidate_lines([str(log)], recognised)) == ["error: head", "error: tail"]


ERROR_WORDS = [
    "RuntimeError",
    "errors",
    "exception",
    "fault",
    "failed",
    "failure",
    "fatal",
    "aborted",
    "timeout",
    "refused",
    "unreachable",
    "denied",
    "rejected",
    "panic",
    "segfault",
    "segmentation",
    "killed",
    "died",
    "dead",
    "crashed",
    "Traceback",
    "cannot",
    "unable",
    "invalid",
    "corrupted",
    "mismatch",
    "WARN",
    "warning",
    "lost",
    "hung",
    "stuck",
    "unexpected",
    "expired",
    "unhealthy",
    "timed out",
    "time out",
    "could not",
    "not found",
]


@pytest.mark.parametrize("word", ERROR_WORDS)
def test_the_byte_keywords_find_every_error_like_word(word: str) -> None:
    """The fast byte search must not miss a line that ERROR_LIKE would keep, nor look for dead words."""
    assert collect.ERROR_LIKE.search(f"x {word} y")
    assert any(keyword in word.lower().encode() for keyword in collect.KEYWORDS)


@pytest.mark.parametrize("keyword", [k.decode() for k in collect.KEYWORDS])
def test_every_byte_keyword_is_an_error_like_word(keyword: str) -> None:
    assert collect.ERROR_LIKE.search(f"x {keyword} y")


def test_credentials_in_residue_lines_are_masked_before_they_are_kept(
    tmp_path: Path, recognised: RecognisedLines
) -> None:
    token = "hf_" + "a1B2c3D4e5" * 4
    log = tmp_path / "rank0.log"
    log.write_text(f"[rank0]: error: model hub refused HF_TOKEN={token} for org-17\n")
    [found] = candidate_lines([str(log)], recognised)
    assert token not in found.text and token not in found.raw
    assert "[REDACTED]" in found.text and "[REDACTED]" in found.raw
