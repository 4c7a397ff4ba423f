"""Inputs the reader must judge right: NUL-padded logs are text, zstd frames with a huge window get a
message that says what is wrong (not "corrupt")."""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard

from matcher.model import InputError
from matcher.pipeline import diagnose
from matcher.reading.sniff import looks_binary

OOM = b"[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"


@pytest.mark.parametrize("padding", [16, 4096, 60_000])
def test_a_small_log_padded_with_nul_is_diagnosed(tmp_path: Path, padding: int) -> None:
    log = tmp_path / "rank0.log"
    log.write_bytes(OOM + b"\x00" * padding)
    assert diagnose([str(log)]).diagnosis.primary.class_id == "cuda/oom"


def test_nul_in_the_middle_of_a_log_is_text_too(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_bytes(b"restarted after a crash\n" + b"\x00" * 8192 + OOM)
    assert diagnose([str(log)]).diagnosis.primary.class_id == "cuda/oom"


@pytest.mark.parametrize(
    "head",
    [
        b"\x00" * 4096,  # nothing but padding
        b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + bytes(range(1, 32)) * 64,  # an executable
        bytes(range(256)) * 16,  # random-looking bytes
    ],
    ids=["only-nul", "elf", "all-bytes"],
)
def test_binary_stays_binary(head: bytes) -> None:
    assert looks_binary(head)


def test_zstd_with_a_window_over_the_default_limit_says_so(tmp_path: Path) -> None:
    """`zstd --long=31` writes frames that need a 2 GiB window; the message must not say "corrupt"."""
    params = zstandard.ZstdCompressionParameters(window_log=31, enable_ldm=True, compression_level=1)
    compressor = zstandard.ZstdCompressor(compression_params=params).compressobj()
    bundle = tmp_path / "rank0.log.zst"
    bundle.write_bytes(compressor.compress(OOM * 100) + compressor.flush())
    with pytest.raises(InputError) as info:
        diagnose([str(bundle)])
    message = str(info.value)
    assert "window" in message and "--long" in message
    assert "corrupt" not in message
