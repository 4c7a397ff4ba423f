"""Reader limits on hostile and damaged input: archives cut short, zip bombs that lie, too many members
or files, unreadable files in a folder, the same file twice, and what the stats say was read."""

from __future__ import annotations

import gzip
import io
import logging
import os
import random
import tarfile
import zipfile
from pathlib import Path

import pytest

from matcher.model import InputError
from matcher.pipeline import diagnose
from matcher.reading.read import ReadLimits, iter_blocks, iter_sources
from tests.fixtures.hostile_files import repeat_central_directory

OOM_LINE = b"[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"


def _noise(lines: int, seed: int = 1) -> bytes:
    """Log lines that compress about as badly as real ones."""
    rng = random.Random(seed)
    return b"".join(b"step %06d loss %x\n" % (i, rng.getrandbits(96)) for i in range(lines))


def _tar(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _text_read(paths: list[str], limits: ReadLimits | None = None) -> dict[str, bytes]:
    return {
        source.name: b"".join(block.data for block in iter_blocks(source, limits))
        for source in iter_sources(paths, limits)
    }


# ---- a tar cut inside a member ----------------------------------------------------------------------


def test_tar_cut_inside_a_member_keeps_everything_before_the_cut(tmp_path: Path) -> None:
    data = _noise(60_000)
    archive = _tar({"rank0.log": data})
    cut = 512 + len(data) * 3 // 4  # the header, then three quarters of the member
    path = tmp_path / "bundle.tar"
    path.write_bytes(archive[:cut])
    (text,) = _text_read([str(path)]).values()
    kept = data[: cut - 512]
    assert text == kept[: kept.rfind(b"\n") + 1] + kept[kept.rfind(b"\n") + 1 :] + b"\n"


def test_compressed_tar_cut_inside_a_member_keeps_everything_before_the_cut(tmp_path: Path) -> None:
    data = _noise(60_000) + OOM_LINE
    squeezed = gzip.compress(_tar({"rank3.log": data}))
    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(squeezed[: len(squeezed) * 3 // 4])
    (text,) = _text_read([str(path)]).values()
    assert len(text) > len(data) // 2  # far more than the 64 KB head that used to survive
    whole_lines = text[: text.rfind(b"\n", 0, len(text) - 1) + 1]  # the last one was cut
    assert data.startswith(whole_lines)


# ---- zip bombs that lie ----------------------------------------------------------------------------


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_zip_entries_pointing_at_the_same_data_are_read_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = _noise(2000) + OOM_LINE
    path = tmp_path / "bundle.zip"
    path.write_bytes(repeat_central_directory(_zip({"rank0.log": data}), 50, rename=True))
    with caplog.at_level(logging.WARNING, logger="ncclbot.read"):
        texts = _text_read([str(path)])
    assert len(texts) == 1
    assert "duplicate zip entry" in caplog.text


def test_small_zip_members_add_up_to_the_archive_ratio_check(tmp_path: Path) -> None:
    """Each member is far below the 64 MiB floor and declares its own (honest) compressed size; the
    ratio is measured for the archive as a whole, against its size on disk."""
    members = {f"rank{i}.log": b"\n" * (8 * 1024**2) for i in range(12)}  # 96 MiB from ~100 KB
    path = tmp_path / "many.zip"
    path.write_bytes(_zip(members))
    with pytest.raises(InputError, match="decompression bomb"):
        _text_read([str(path)])


# ---- too many members or files ---------------------------------------------------------------------


def test_tar_with_too_many_members_is_refused_before_any_member_is_read(tmp_path: Path) -> None:
    path = tmp_path / "many.tar"
    path.write_bytes(_tar({f"rank{i}.log": OOM_LINE for i in range(101)}))
    sources = iter_sources([str(path)], ReadLimits(max_archive_members=100))
    with pytest.raises(InputError, match="more than 100 archive members"):
        next(sources)  # refused before the first member is handed out


def test_folder_with_too_many_files_is_refused_while_listing(tmp_path: Path) -> None:
    for i in range(21):
        (tmp_path / f"rank{i}.log").write_bytes(OOM_LINE)
    with pytest.raises(InputError, match="folder holds more than 20 files"):
        next(iter_sources([str(tmp_path)], ReadLimits(max_folder_files=20)))


# ---- unreadable files, repeated files, unusable sizes ----------------------------------------------


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux /proc")
def test_unreadable_file_in_a_folder_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "rank3.log").write_bytes(OOM_LINE)
    os.symlink("/proc/self/mem", tmp_path / "rank4.log")  # reading it at offset 0 fails with EIO
    with caplog.at_level(logging.WARNING, logger="ncclbot.read"):
        diagnosis = diagnose([str(tmp_path)]).diagnosis
    assert diagnosis.primary.class_id == "cuda/oom"
    assert "rank4.log: cannot read" in caplog.text


def test_file_given_twice_is_read_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "rank3.log"
    path.write_bytes(_noise(100) + OOM_LINE)
    with caplog.at_level(logging.WARNING, logger="ncclbot.read"):
        twice = diagnose([str(path), str(path), str(tmp_path)]).diagnosis
    once = diagnose([str(path)]).diagnosis
    assert (twice.stats.bytes, twice.stats.lines) == (once.stats.bytes, once.stats.lines)
    assert "given more than once" in caplog.text


def test_stats_count_the_bytes_read_not_the_bytes_kept(tmp_path: Path) -> None:
    path = tmp_path / "rank3.log"
    path.write_bytes(b"x" * (3 * 1024**2) + b"\n" + OOM_LINE + b"\x00" * 1000)  # a 3 MiB line, NUL padding
    stats = diagnose([str(path)]).diagnosis.stats
    assert stats.bytes == path.stat().st_size
    assert stats.lines == 3
