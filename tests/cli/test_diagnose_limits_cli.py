"""Unusable reader settings on the command line are one clear line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import run_cli


@pytest.mark.parametrize("size", ["inf", "-inf", "nan", "1e400G", "lots"])
def test_an_impossible_max_input_bytes_is_a_one_line_error(tmp_path: Path, size: str) -> None:
    log = tmp_path / "rank0.log"
    log.write_text("[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n")
    result = run_cli("diagnose", str(log), "--no-store", f"--max-input-bytes={size}")
    stderr = result.stderr.decode()
    assert result.returncode == 2
    assert "not a size" in stderr or "must be positive" in stderr
    assert "Traceback" not in stderr
