"""iter_sources: every accepted input kind, path hints, and the refusals (one-line InputError)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
import zstandard

from matcher.model import InputError
from matcher.reading.read import ReadLimits, Source, iter_blocks, iter_sources


def read_all(paths: list[str], limits: ReadLimits | None = None, stdin: io.BufferedIOBase | None = None):
    """(name, rank, host, kind, content) for every source, consumed in the normal streaming order."""
    out = []
    for source in iter_sources(paths, limits, stdin=stdin):  # type: ignore[arg-type]
        content = b"".join(block.data for block in iter_blocks(source, limits))
        out.append((source.name, source.rank, source.host, source.kind, content))
    return out


def tar_bytes(members: dict[str, bytes], mode: str = "w") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_plain_file_keeps_path_as_name_and_hints_rank(tmp_path: Path) -> None:
    log = tmp_path / "rank3.log"
    log.write_bytes(b"hello\nworld\n")
    assert read_all([str(log)]) == [(str(log), 3, None, "text", b"hello\nworld\n")]


def test_several_paths_keep_the_given_order(tmp_path: Path) -> None:
    (tmp_path / "b.log").write_bytes(b"b\n")
    (tmp_path / "a.log").write_bytes(b"a\n")
    names = [name for name, *_ in read_all([str(tmp_path / "b.log"), str(tmp_path / "a.log")])]
    assert names == [str(tmp_path / "b.log"), str(tmp_path / "a.log")]


def test_torchrun_log_dir_is_walked_in_natural_order(tmp_path: Path) -> None:
    for rank in (10, 2, 1):
        folder = tmp_path / "run_abc" / "attempt_0" / str(rank)
        folder.mkdir(parents=True)
        (folder / "stderr.log").write_bytes(f"[rank{rank}]: err\n".encode())
        (folder / "stdout.log").write_bytes(b"out\n")
    got = [
        (Path(name).relative_to(tmp_path).as_posix(), rank) for name, rank, *_ in read_all([str(tmp_path)])
    ]
    assert got == [
        ("run_abc/attempt_0/1/stderr.log", 1),
        ("run_abc/attempt_0/1/stdout.log", 1),
        ("run_abc/attempt_0/2/stderr.log", 2),
        ("run_abc/attempt_0/2/stdout.log", 2),
        ("run_abc/attempt_0/10/stderr.log", 10),
        ("run_abc/attempt_0/10/stdout.log", 10),
    ]


@pytest.mark.parametrize(
    ("relative", "rank", "host"),
    [
        ("slurm-4242_7.out", 7, None),
        ("4242.3.err", 3, None),
        ("worker-5.log", 5, None),
        ("logs/rank_12.txt", 12, None),
        ("node-017/rank12.err", 12, "node-017"),
        ("gpu-node-3/attempt_0/1/stderr.log", None, "gpu-node-3"),  # local rank of a multi-node tree
        ("ip-10-0-1-7/train.log", None, "ip-10-0-1-7"),
        ("nccl_trace_rank_6", 6, None),
        ("train-2024-05.log", None, None),
        ("020-run-rank2-oom-notes.log", None, None),  # descriptive, not a per-rank file
        ("rank3_stderr.log", 3, None),
        ("train_rank3.log", 3, None),
    ],
)
def test_rank_and_host_hints_from_path(
    tmp_path: Path, relative: str, rank: int | None, host: str | None
) -> None:
    path = tmp_path / "job" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"line\n")
    [(_, got_rank, got_host, _, _)] = read_all([str(tmp_path / "job")])
    assert (got_rank, got_host) == (rank, host)


@pytest.mark.parametrize(
    "compress",
    [gzip.compress, zstandard.ZstdCompressor().compress, lzma.compress, bz2.compress],
    ids=["gzip", "zstd", "xz", "bzip2"],
)
def test_compressed_file_detected_by_magic_not_extension(tmp_path: Path, compress) -> None:
    path = tmp_path / "rank1.txt"  # no compression extension on purpose
    path.write_bytes(compress(b"one\ntwo\n"))
    assert read_all([str(path)]) == [(str(path), 1, None, "text", b"one\ntwo\n")]


def test_tar_gz_members_are_named_inside_the_archive_and_streamed(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle.tar.gz"
    bundle.write_bytes(
        tar_bytes(
            {"attempt_0/3/stderr.log": b"[rank3]: boom\n", "attempt_0/0/stderr.log": b"zero\n"}, mode="w:gz"
        )
    )
    got = read_all([str(bundle)])
    assert [(name, rank, content) for name, rank, _, _, content in got] == [
        (f"{bundle}!attempt_0/3/stderr.log", 3, b"[rank3]: boom\n"),  # archive order
        (f"{bundle}!attempt_0/0/stderr.log", 0, b"zero\n"),
    ]


def test_tar_member_opened_after_iteration_moved_on_is_reread(tmp_path: Path) -> None:
    bundle = tmp_path / "b.tgz"
    bundle.write_bytes(tar_bytes({"a.log": b"a\n", "b.log": b"b\n"}, mode="w:gz"))
    sources = list(iter_sources([str(bundle)]))
    assert [b"".join(b.data for b in iter_blocks(s)) for s in reversed(sources)] == [b"b\n", b"a\n"]


def test_zip_members_sorted_with_compressed_member(tmp_path: Path) -> None:
    bundle = tmp_path / "logs.zip"
    bundle.write_bytes(zip_bytes({"rank10.log": b"ten\n", "rank2.log.gz": gzip.compress(b"two\n")}))
    got = read_all([str(bundle)])
    assert [(name, rank, content) for name, rank, _, _, content in got] == [
        (f"{bundle}!rank2.log.gz", 2, b"two\n"),
        (f"{bundle}!rank10.log", 10, b"ten\n"),
    ]


def test_hostile_member_names_are_only_names_and_nothing_is_written(tmp_path: Path) -> None:
    evil = {"../../evil_zip.txt": b"x\n", "/tmp/evil_abs.txt": b"y\n", "ok.log": b"z\n"}
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.zip").write_bytes(zip_bytes(evil))
    (tmp_path / "in" / "b.tar").write_bytes(tar_bytes(evil))
    before = set(tmp_path.rglob("*"))
    cwd = os.getcwd()
    os.chdir(tmp_path / "in")
    try:
        got = read_all(["a.zip", "b.tar"])
    finally:
        os.chdir(cwd)
    assert set(tmp_path.rglob("*")) == before
    assert not Path("/tmp/evil_abs.txt").exists()
    assert {name for name, *_ in got} >= {"a.zip!../../evil_zip.txt", "b.tar!/tmp/evil_abs.txt"}


def test_tar_symlinks_and_devices_are_ignored(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        link = tarfile.TarInfo("link.log")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        archive.addfile(link)
        device = tarfile.TarInfo("dev.log")
        device.type = tarfile.CHRTYPE
        archive.addfile(device)
        real = tarfile.TarInfo("real.log")
        real.size = 5
        archive.addfile(real, io.BytesIO(b"real\n"))
    bundle = tmp_path / "b.tar"
    bundle.write_bytes(buffer.getvalue())
    assert [name for name, *_ in read_all([str(bundle)])] == [f"{bundle}!real.log"]


def test_nested_archive_is_skipped_when_other_logs_exist(tmp_path: Path, caplog) -> None:
    inner = tar_bytes({"deep.log": b"deep\n"}, mode="w:gz")
    bundle = tmp_path / "outer.tar"
    bundle.write_bytes(tar_bytes({"inner.tar.gz": inner, "top.log": b"top\n"}))
    got = read_all([str(bundle)])
    assert [name for name, *_ in got] == [f"{bundle}!top.log"]
    assert "inner.tar.gz: skipped" in caplog.text


def test_only_a_nested_archive_is_an_input_error(tmp_path: Path) -> None:
    bundle = tmp_path / "outer.zip"
    bundle.write_bytes(zip_bytes({"inner.zip": zip_bytes({"a.log": b"a\n"})}))
    with pytest.raises(InputError, match="archive inside an archive"):
        read_all([str(bundle)])


def test_stdin_plain_and_gzip() -> None:
    assert read_all(["-"], stdin=io.BytesIO(b"from stdin\n")) == [
        ("<stdin>", None, None, "text", b"from stdin\n")
    ]
    gz = io.BytesIO(gzip.compress(b"zipped stdin\n"))
    assert read_all(["-"], stdin=gz)[0][4] == b"zipped stdin\n"


def test_stdin_tar_members_can_be_read_in_order_only_once() -> None:
    stdin = io.BytesIO(tar_bytes({"a.log": b"a\n", "b.log": b"b\n"}))
    assert [(name, content) for name, *_, content in read_all(["-"], stdin=stdin)] == [
        ("<stdin>!a.log", b"a\n"),
        ("<stdin>!b.log", b"b\n"),
    ]
    stdin = io.BytesIO(tar_bytes({"a.log": b"a\n", "b.log": b"b\n"}))
    sources = list(iter_sources(["-"], stdin=stdin))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="in order"):
        list(iter_blocks(sources[0]))


def test_stdin_zip_is_refused_clearly() -> None:
    with pytest.raises(InputError, match="random access"):
        read_all(["-"], stdin=io.BytesIO(zip_bytes({"a.log": b"a\n"})))


def test_flight_recorder_pickle_and_json_detected_by_content(tmp_path: Path) -> None:
    import pickle

    dump = {"version": "2.9", "pg_config": {}, "entries": [{"collective_seq_id": 1}]}
    (tmp_path / "_dump_3").write_bytes(pickle.dumps(dump, protocol=2))
    (tmp_path / "trace_rank_4.json").write_bytes(b'{"version": "2.9", "entries": []}')
    (tmp_path / "rank0.log").write_bytes(b"text\n")
    (tmp_path / "gz_dump_5").write_bytes(gzip.compress(pickle.dumps(dump, protocol=4)))
    got = {Path(name).name: (rank, kind) for name, rank, _, kind, _ in read_all([str(tmp_path)])}
    assert got == {
        "_dump_3": (3, "flight-recorder"),
        "gz_dump_5": (5, "flight-recorder"),
        "rank0.log": (0, "text"),
        "trace_rank_4.json": (4, "flight-recorder"),
    }


def test_flight_recorder_source_yields_the_unpickled_bytes_unchanged(tmp_path: Path) -> None:
    import pickle

    payload = pickle.dumps({"version": "2.9", "entries": [b"\n\x00\r" * 10]}, protocol=2)
    (tmp_path / "d").write_bytes(gzip.compress(payload))
    [source] = iter_sources([str(tmp_path / "d")])
    with source.opener() as stream:
        assert stream.read() == payload


def test_missing_path_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_all([str(tmp_path / "nope.log")])


def test_empty_folder_and_empty_files(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="folder has no files"):
        read_all([str(tmp_path / "empty")])
    (tmp_path / "a.log").write_bytes(b"")
    (tmp_path / "b.log").write_bytes(b"")
    with pytest.raises(InputError, match=r"a\.log is empty"):
        read_all([str(tmp_path / "a.log")])
    with pytest.raises(InputError, match="empty"):
        read_all([str(tmp_path / "a.log"), str(tmp_path / "b.log")])
    with pytest.raises(InputError, match="empty"):
        read_all(["-"], stdin=io.BytesIO(b""))


def test_a_ranks_empty_file_is_kept_as_that_ranks_silence(tmp_path: Path) -> None:
    # torchrun --log-dir: rank 2 wrote nothing while rank 0 reported a failure.
    for rank, text in ((0, b"RuntimeError: Connection closed by peer\n"), (2, b"")):
        folder = tmp_path / "attempt_0" / str(rank)
        folder.mkdir(parents=True)
        (folder / "stderr.log").write_bytes(text)
    found = {(rank, content) for _, rank, _, _, content in read_all([str(tmp_path)])}
    assert found == {(0, b"RuntimeError: Connection closed by peer\n"), (2, b"")}
    (tmp_path / "attempt_0" / "0" / "stderr.log").write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        read_all([str(tmp_path)])


def test_binary_alone_is_input_error_but_skipped_beside_logs(tmp_path: Path, caplog) -> None:
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(InputError, match=r"core\.bin is not a text log \(binary data\)"):
        read_all([str(binary)])
    (tmp_path / "rank0.log").write_bytes(b"fine\n")
    assert [Path(name).name for name, *_ in read_all([str(tmp_path)])] == ["rank0.log"]
    assert "core.bin is not a text log" in caplog.text


def test_latin1_and_utf8_text_is_not_binary(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes("Größe überschritten — 错误\n".encode() + "caf\xe9\n".encode("latin-1"))
    assert read_all([str(path)])[0][3] == "text"


def test_input_error_messages_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 100)
    with pytest.raises(InputError) as caught:
        read_all([str(tmp_path / "bad.gz")])
    assert "\n" not in str(caught.value)
    assert "bad.gz" in str(caught.value)


def test_truncated_gzip_keeps_what_is_readable(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(b"line %d\n" % i for i in range(10_000)))
    (tmp_path / "cut.log.gz").write_bytes(data[: len(data) // 2])
    [(_, _, _, _, content)] = read_all([str(tmp_path / "cut.log.gz")])
    assert content.startswith(b"line 0\nline 1\n")
    assert content.endswith(b"\n")


def write_text_bomb(path: Path, megabytes: int) -> None:
    chunk = b"A" * (1024 * 1024 - 1) + b"\n"  # text, so it is not refused as binary before it expands
    with gzip.open(path, "wb", compresslevel=1) as out:
        for _ in range(megabytes):
            out.write(chunk)


def test_decompression_bomb_hits_the_input_budget_quickly(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.log.gz"
    write_text_bomb(bomb, 200)
    started = time.monotonic()
    with pytest.raises(InputError, match="larger than 10000000 bytes once decompressed"):
        read_all([str(bomb)], ReadLimits(max_input_bytes=10_000_000))
    assert time.monotonic() - started < 5


def test_decompression_bomb_hits_the_ratio_guard(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz") as archive:
        info = tarfile.TarInfo("zeros.log")
        info.size = 200 * 1024 * 1024
        archive.addfile(info, io.BytesIO(bytes(info.size)))
    with pytest.raises(InputError, match="decompression bomb"):
        read_all([str(bomb)], ReadLimits(max_ratio=100))


def test_budget_counts_across_all_sources(tmp_path: Path) -> None:
    for index in range(5):
        (tmp_path / f"rank{index}.log").write_bytes(b"x" * 999 + b"\n")
    read_all([str(tmp_path)], ReadLimits(max_input_bytes=5000))
    with pytest.raises(InputError, match="larger than 4500 bytes"):
        read_all([str(tmp_path)], ReadLimits(max_input_bytes=4500))


def test_budget_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"y" * 100 + b"\n")
    monkeypatch.setenv("NCCLBOT_MAX_INPUT_BYTES", "50")
    with pytest.raises(InputError, match="NCCLBOT_MAX_INPUT_BYTES"):
        read_all([str(tmp_path / "a.log")])
    monkeypatch.setenv("NCCLBOT_MAX_INPUT_BYTES", "lots")
    with pytest.raises(InputError, match="not a positive number"):
        ReadLimits()


def test_too_many_members(tmp_path: Path) -> None:
    bundle = tmp_path / "many.tar"
    bundle.write_bytes(tar_bytes({f"r{i}.log": b"x\n" for i in range(20)}))
    with pytest.raises(InputError, match="more than 10 archive members"):
        read_all([str(bundle)], ReadLimits(max_archive_members=10))


def test_fifo_path_is_read_as_a_stream(tmp_path: Path) -> None:
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as writer:
            writer.write(b"through a pipe\n")

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        assert read_all([str(fifo)])[0][4] == b"through a pipe\n"
    finally:
        feeder.join(timeout=5)


def test_source_is_plain_data() -> None:
    source = Source("x", opener=lambda: io.BytesIO(b""))  # type: ignore[arg-type, return-value]
    assert (source.rank, source.host, source.kind) == (None, None, "text")


def test_text_sources_carry_the_first_year_written_in_them(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"no date here\n2023-12-30 23:59:58,100 - root - INFO - saving\n")
    (tmp_path / "b.log").write_bytes(b"[rank0]:[E1230 23:59:59.0 x.cpp:1] no year in this one\n")
    years = {Path(source.name).name: source.year for source in iter_sources([str(tmp_path)])}
    assert years == {"a.log": 2023, "b.log": None}


def test_names_with_control_characters_or_undecodable_bytes_print_on_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "line\nbreak.log").write_bytes(b"a\n")
    os.close(os.open(os.path.join(os.fsencode(folder), b"bad\xff.log"), os.O_CREAT | os.O_WRONLY))
    (folder / "inner.tar").write_bytes(tar_bytes({"x\rname.log": b"b\n"}))
    names = [name for name, *_ in read_all([str(folder)])]
    assert all(name.isprintable() for name in names)
    assert [Path(name).name for name in names] == ["inner.tar!x\ufffdname.log", "line\ufffdbreak.log"]
    with pytest.raises(InputError) as caught:
        read_all([str(folder / "bad\udcff.log")])
    assert str(caught.value) == f"{folder}/bad\ufffd.log is empty"


def test_utf16_text_with_a_byte_order_mark_is_transcoded(tmp_path: Path) -> None:
    text = "2024-05-01 03:11:40 start\n[rank1]: Größe 错误\n" * 3000
    path = tmp_path / "powershell.log"
    path.write_bytes(text.encode("utf-16"))
    [(_, _, _, kind, content)] = read_all([str(path)])
    assert (kind, content.decode()) == ("text", text)
    [source] = iter_sources([str(path)])
    assert source.year == 2024


def test_read_n_returns_n_bytes_unless_the_stream_ends(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 40_000  # 10 MB that gzip hands out in many small pieces
    (tmp_path / "dump.gz").write_bytes(gzip.compress(b"\x80\x02" + payload))
    [source] = iter_sources([str(tmp_path / "dump.gz")])
    with source.opener() as stream:
        assert len(stream.read(5_000_000)) == 5_000_000
        assert len(stream.read(50_000_000)) == len(payload) + 2 - 5_000_000
        assert stream.read(10) == b""


def test_zip_member_bomb_hits_the_ratio_guard(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.zip"
    line = b"A" * 1023 + b"\n"
    with (
        zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive,
        archive.open("rank0.log", "w") as member,
    ):
        for _ in range(200 * 1024):
            member.write(line)
    with pytest.raises(InputError, match="decompression bomb"):
        read_all([str(bomb)], ReadLimits(max_ratio=100))


@pytest.mark.parametrize(
    ("content", "labels_are_ranks"),
    [
        (b"0: [default0]:[rank0]: hi\n1: [default0]:[rank8]: hi\n", False),  # srun -> torchrun per node
        (b"1: [rank8]:[E1129 03:11:40.0 x.cpp:1] boom\n", False),
        (b"3: [rank3]: hi\n12: [rank12]: hi\n", True),  # srun task per rank
        (b"plain log\n", True),
    ],
)
def test_sources_say_whether_slurm_labels_are_ranks(
    tmp_path: Path, content: bytes, labels_are_ranks: bool
) -> None:
    (tmp_path / "job.out").write_bytes(content)
    [source] = iter_sources([str(tmp_path / "job.out")])
    assert source.labels_are_ranks is labels_are_ranks
