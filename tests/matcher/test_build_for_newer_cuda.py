"""An NCCL / torch build for a newer major CUDA than the driver supports cannot initialise; a newer minor
release of the same major runs (CUDA minor-version compatibility). Excerpts written for these tests."""

from __future__ import annotations

from pathlib import Path

from tests.matcher.excerpts import class_ids, diagnose_text

SETUP = """
node-7:811:811 [0] NCCL INFO cudaDriverVersion {driver}
NCCL version 2.21.5+cuda{build}
node-7:811:811 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.7<0>
node-7:811:830 [0] NCCL INFO Channel 00/02 :    0   1
"""


def test_a_build_for_a_newer_major_cuda_than_the_driver_is_a_version_mismatch(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, SETUP.format(driver="11080", build="12.4"))
    assert class_ids(d)[0] == "config/version-mismatch"


def test_a_newer_minor_cuda_on_the_same_major_driver_is_no_mismatch(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, SETUP.format(driver="12020", build="12.4"))
    assert "config/version-mismatch" not in class_ids(d)[:1]
