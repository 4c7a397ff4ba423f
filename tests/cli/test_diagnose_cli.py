"""`ncclbot diagnose` end to end through the console entry point: JSON contract, exit codes, errors."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from matcher.rules import ANALYSIS_VERSION
from matcher.taxonomy import CLASSES
from tests.cli.helpers import EXAMPLE, run_cli, run_json

NO_STORE = "--no-store"


def assert_design_schema(document: dict[str, Any]) -> None:
    """The `--json` contract of DESIGN.md, field by field."""
    assert document["schema_version"] == 1
    assert document["analysis_version"] == ANALYSIS_VERSION  # catalog + rules that produced it
    diagnoses = document["diagnoses"]
    assert diagnoses, "diagnoses is never empty"
    for item in diagnoses:
        assert item["class"] in CLASSES
        assert 0.0 <= item["confidence"] <= 1.0
        assert isinstance(item["title"], str) and item["title"]
        for evidence in item["evidence"]:
            assert set(evidence) == {"source", "line", "text", "signature"}
            assert isinstance(evidence["line"], int) and evidence["line"] >= 1
    confidences = [d["confidence"] for d in diagnoses]
    assert confidences == sorted(confidences, reverse=True), "ranked, first = primary"
    culprit = document["culprit"]
    if culprit is not None:
        assert set(culprit) == {"ranks", "hosts", "reason"} and culprit["reason"]
    assert document["symptom"] is None or isinstance(document["symptom"], str)
    assert set(document["stats"]) == {"bytes", "lines", "ranks", "seconds"}
    assert document["runbook"]["class"] == diagnoses[0]["class"]
    for item in document["to_settle"]:  # what would confirm a guess; [] when the diagnosis is sure
        assert set(item) == {"class", "title", "collect"} and item["collect"]


def test_bundled_example_names_the_oom_rank_and_its_node() -> None:
    document = run_json("diagnose", str(EXAMPLE), NO_STORE)
    assert_design_schema(document)
    assert document["diagnoses"][0]["class"] == "cuda/oom"
    assert document["culprit"]["ranks"] == [5]
    assert document["culprit"]["hosts"] == ["gpu-node-02"]
    assert document["symptom"]
    assert document["stats"]["ranks"] == 8
    assert "incident" not in document


THIN_PASTE = (
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:47, "
    "unhandled system error, NCCL version 2.7.8\n"
)


def test_a_sure_diagnosis_asks_for_nothing_more() -> None:
    assert run_json("diagnose", str(EXAMPLE), NO_STORE)["to_settle"] == []


def test_a_thin_paste_says_what_would_settle_each_class_it_guesses(tmp_path: Path) -> None:
    log = tmp_path / "paste.log"
    log.write_text(THIN_PASTE, encoding="utf-8")
    document = run_json("diagnose", str(log), NO_STORE)
    assert_design_schema(document)
    assert document["diagnoses"][0]["confidence"] < 0.5
    listed = [d["class"] for d in document["diagnoses"] if d["class"] != "unknown"][:3]
    assert [item["class"] for item in document["to_settle"]] == listed
    out = run_cli("diagnose", str(log), NO_STORE).stdout.decode()
    assert "What would settle it (this is a guess)" in out
    assert "NCCL_DEBUG=INFO" in out.split("What would settle it", 1)[1]


EVICTED_POD = "Status: Failed Reason: Evicted Message: Pod The node had condition: [DiskPressure].\n"


def test_a_guess_filled_with_next_checks_reads_the_same_in_json_text_and_settle(tmp_path: Path) -> None:
    log = tmp_path / "pod.log"
    log.write_text(EVICTED_POD, encoding="utf-8")
    document = run_json("diagnose", str(log), NO_STORE)
    assert_design_schema(document)  # ranked by confidence, first = primary, filled ones included
    classes = [d["class"] for d in document["diagnoses"]]
    named = [c for c in classes if c != "unknown"]
    assert classes[0] == "unknown" and len(named) == 3
    assert not document["diagnoses"][-1]["evidence"]  # a next check has no line of its own
    assert [item["class"] for item in document["to_settle"]] == named
    assert document["culprit"] is None
    out = run_cli("diagnose", str(log), NO_STORE).stdout.decode()
    considered = out.split("Also considered", 1)[1].split("What would settle it", 1)[0]
    assert all(c in considered for c in named)
    settle = out.split("What would settle it (this is a guess)", 1)[1]
    assert all(f"{c}:" in settle for c in named)


def test_human_output_has_headline_culprit_evidence_and_runbook() -> None:
    result = run_cli("diagnose", str(EXAMPLE), NO_STORE)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert "cuda/oom" in out
    assert "gpu-node-02" in out
    assert "rank5.log:" in out  # evidence cites file:line
    assert "Traceback" not in result.stderr.decode()


def test_stdin_is_read_when_path_is_dash() -> None:
    data = (EXAMPLE / "rank5.log").read_bytes()
    document = run_json("diagnose", "-", NO_STORE, stdin=data)
    assert document["diagnoses"][0]["class"] == "cuda/oom"


def test_compressed_bundle_gives_the_same_answer(tmp_path: Path) -> None:
    bundle = tmp_path / "job.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(EXAMPLE, arcname="job-4242")
    document = run_json("diagnose", str(bundle), NO_STORE)
    assert document["diagnoses"][0]["class"] == "cuda/oom"
    assert document["culprit"]["ranks"] == [5]


def test_unknown_is_still_a_diagnosis(tmp_path: Path) -> None:
    log = tmp_path / "quiet.log"
    log.write_text("epoch 1 done\nsaving nothing in particular\nall good\n")
    document = run_json("diagnose", str(log), NO_STORE)
    assert document["diagnoses"][0]["class"] == "unknown"
    assert document["culprit"] is None


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("empty.log", b""),
        ("blob.bin", bytes(range(256)) * 64),
        ("bomb.gz", None),
    ],
)
def test_unusable_input_exits_2_with_one_line(tmp_path: Path, name: str, content: bytes | None) -> None:
    path = tmp_path / name
    if content is None:  # 64 MiB of zeros compress to ~64 KiB; the cap below is 1 MiB
        buffer = io.BytesIO()
        with gzip.GzipFile(fileobj=buffer, mode="wb") as gz:
            gz.write(b"\0" * (64 * 1024 * 1024))
        path.write_bytes(buffer.getvalue())
    else:
        path.write_bytes(content)
    result = run_cli("diagnose", str(path), NO_STORE, "--max-input-bytes", "1M")
    err = result.stderr.decode()
    assert result.returncode == 2, (result.returncode, err)
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_missing_path_exits_2(tmp_path: Path) -> None:
    result = run_cli("diagnose", str(tmp_path / "nope.log"), NO_STORE)
    assert result.returncode == 2
    assert "nope.log" in result.stderr.decode()


def test_log_text_cannot_inject_terminal_markup(tmp_path: Path) -> None:
    log = tmp_path / "hostile.log"
    log.write_text(
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. "
        "[bold red]PWNED[/bold red] \x1b[2J\x1b]0;title\x07\n"
    )
    result = run_cli("diagnose", str(log), NO_STORE)
    out = result.stdout.decode()
    assert result.returncode == 0
    assert "[bold red]PWNED[/bold red]" in out  # markup printed literally, never interpreted
    assert "\x1b[2J" not in out and "\x1b]0;" not in out


def test_diagnosis_is_stored_and_repeats_are_counted(tmp_path: Path) -> None:
    env = {"NCCLBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite3'}"}
    first = run_json("diagnose", str(EXAMPLE), "--job-id", "101", env=env)
    again = run_json("diagnose", str(EXAMPLE), "--job-id", "101", env=env)  # same job, same logs
    assert first["incident"]["occurrences"] == 1
    assert again["incident"] == first["incident"] | {"last_seen": again["incident"]["last_seen"]}
    later = run_cli("diagnose", str(EXAMPLE), "--job-id", "102", env=env)
    out = later.stdout.decode()
    assert later.returncode == 0, later.stderr.decode()
    assert "Recurrence:" in out and "gpu-node-02" in out.split("Recurrence:", 1)[1].splitlines()[0]


def test_unreachable_database_still_prints_the_diagnosis(tmp_path: Path) -> None:
    env = {"NCCLBOT_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    result = run_cli("diagnose", str(EXAMPLE), env=env)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert "cuda/oom" in result.stdout.decode()
    assert err.count("\n") == 1 and "diagnosis not stored" in err


def test_version_flag() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.decode().startswith("ncclbot ")
