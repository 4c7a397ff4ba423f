"""The input digest identifies the logs themselves: stable across runs and catalog versions."""

from __future__ import annotations

import shutil
from pathlib import Path

from matcher.pipeline import diagnose
from matcher.scanning.catalog import DEFAULT_DIRECTORY, load_catalog

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "oom-one-rank"


def test_same_logs_same_digest_and_any_edit_changes_it(tmp_path: Path) -> None:
    copy = tmp_path / "job"
    shutil.copytree(EXAMPLE, copy)
    first = diagnose([str(copy)]).input_digest
    assert diagnose([str(copy)]).input_digest == first
    log = copy / "rank3.log"
    text = log.read_text()
    log.write_text(text.replace("step 1190", "step 1191", 1))  # same size, one byte differs
    assert len(log.read_text()) == len(text)
    assert diagnose([str(copy)]).input_digest != first


def test_digest_does_not_depend_on_the_signatures(tmp_path: Path) -> None:
    signatures = tmp_path / "signatures"
    signatures.mkdir()
    shutil.copy(DEFAULT_DIRECTORY / "cuda-oom.toml", signatures / "cuda-oom.toml")
    fewer = diagnose([str(EXAMPLE)], catalog=load_catalog(signatures))
    assert fewer.input_digest == diagnose([str(EXAMPLE)]).input_digest
