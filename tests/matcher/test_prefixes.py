"""parse_line: every prefix form, stacked forms, what each says (rank, local rank, host, pid, time)."""

from __future__ import annotations

import calendar
import io

import pytest

from matcher.reading.prefixes import RAW_CAP, parse_line, parse_segments
from matcher.reading.read import Source

PLAIN = Source("job.log", opener=lambda: io.BytesIO(b""))  # type: ignore[arg-type, return-value]
HINTED = Source("node-017/rank9.log", opener=lambda: io.BytesIO(b""), rank=9, host="node-017")  # type: ignore[arg-type, return-value]


def utc(year: int, month: int, day: int, hour: int, minute: int, second: int, fraction: float = 0.0) -> float:
    return calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) + fraction


# (raw line, expected text, expected attributes); attributes not listed must be None.
CASES = [
    pytest.param(
        b"[rank5]:[E906 12:16:32.611181197 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective\n",
        "[Rank 5] Watchdog caught collective",
        {"rank": 5, "time": utc(2024, 9, 6, 12, 16, 32, 0.611181197)},
        id="c10-2.4+",
    ),
    pytest.param(
        b"[rank144]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 144] Heartbeat monitor timed out!\n",
        "[PG 0 Rank 144] Heartbeat monitor timed out!",
        {"rank": 144},
        id="c10-2.2",
    ),
    pytest.param(
        b"[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout\n",
        "[Rank 0] Watchdog caught collective operation timeout",
        {},
        id="c10-1.13-pg-local-rank-stays-in-text",
    ),
    pytest.param(
        b"[rank2]: Traceback (most recent call last):\n",
        "Traceback (most recent call last):",
        {"rank": 2},
        id="excepthook",
    ),
    pytest.param(
        b"[default2]:[rank2]: ValueError: bad value on rank 2\n",
        "ValueError: bad value on rank 2",
        {"rank": 2, "local_rank": 2},
        id="torchrun-tee-stacked",
    ),
    pytest.param(
        b"[trainer3]:hello\n",
        "hello",
        {"local_rank": 3},
        id="torchrun-tee-custom-role",
    ),
    pytest.param(
        b"  2: p5-dy-gpu-3:60823:61204 [2] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.14.0\n",
        "NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.14.0",
        {"rank": 2, "host": "p5-dy-gpu-3", "pid": 60823},
        id="slurm-label-nccl",
    ),
    pytest.param(
        b"13: [default1]:[rank13]: RuntimeError: x\n",
        "RuntimeError: x",
        {"rank": 13, "local_rank": 1},
        id="slurm-torchrun-rank-tag",
    ),
    pytest.param(
        b"1: [default1]:RuntimeError: y\n",
        "RuntimeError: y",
        {"local_rank": 1},
        id="slurm-over-torchrun-is-a-node-index-not-a-rank",
    ),
    pytest.param(
        b"[1,3]<stderr>:[E ProcessGroupNCCL.cpp:458] [Rank 3] Watchdog\n",
        "[Rank 3] Watchdog",
        {"rank": 3},
        id="mpi",
    ),
    pytest.param(
        b"(RayWorkerWrapper pid=123) ERROR worker failed\n",
        "ERROR worker failed",
        {"pid": 123},
        id="ray",
    ),
    pytest.param(
        b"(WorkerDict pid=3490362, ip=10.0.0.1) [rank1]:[W1129 03:11:40.000000 foo.cpp:1] hi\n",
        "hi",
        {"rank": 1, "pid": 3490362, "host": "10.0.0.1", "time": utc(2024, 11, 29, 3, 11, 40)},
        id="ray-with-ip-stacked",
    ),
    pytest.param(
        b"E0820 14:27:21.486436 4030959 ProcessGroupNCCL.cpp:915] some error\n",
        "some error",
        {"time": utc(2024, 8, 20, 14, 27, 21, 0.486436)},
        id="glog-thread-id-is-not-a-pid",
    ),
    pytest.param(
        b"E1129 09:17:45.892000 30184 torch/distributed/elastic/multiprocessing/api.py:1002] "
        b"failed (exitcode: 1)\n",
        "failed (exitcode: 1)",
        {"pid": 30184, "time": utc(2024, 11, 29, 9, 17, 45, 0.892)},
        id="torch-logging-2.3+",
    ),
    pytest.param(
        b"[2024-03-18 17:38:50,208] torch.distributed.elastic.multiprocessing.api: [ERROR] failed\n",
        "failed",
        {"time": utc(2024, 3, 18, 17, 38, 50, 0.208)},
        id="torch-logging-2.1",
    ),
    pytest.param(
        b"ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0\n",
        "failed (exitcode: 1) local_rank: 0",
        {},
        id="python-logging",
    ),
    pytest.param(
        b"gpu-node-017:4120:4388 [3] "
        b"NCCL INFO comm 0x5f rank 12 nranks 16 cudaDev 3 busId 3b000 - Init COMPLETE\n",
        "NCCL INFO comm 0x5f rank 12 nranks 16 cudaDev 3 busId 3b000 - Init COMPLETE",
        {"host": "gpu-node-017", "pid": 4120},
        id="nccl-info",
    ),
    pytest.param(
        b"[2025-06-01 10:00:02] gpu1:12:34 [0] transport/net_ib.cc:1234 NCCL WARN NET/IB : Got completion\n",
        "transport/net_ib.cc:1234 NCCL WARN NET/IB : Got completion",
        {"host": "gpu1", "pid": 12, "time": utc(2025, 6, 1, 10, 0, 2)},
        id="nccl-2.26-warn-timestamp",
    ),
    pytest.param(
        b"Nov 29 03:11:40 gpu-node-017 kernel: "
        b"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n",
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
        {"host": "gpu-node-017", "time": utc(2024, 11, 29, 3, 11, 40)},
        id="syslog",
    ),
    pytest.param(
        b"2024-05-01T03:11:40.123456+00:00 gpu-node-1 kernel: NVRM: Xid x\n",
        "NVRM: Xid x",
        {"host": "gpu-node-1", "time": utc(2024, 5, 1, 3, 11, 40, 0.123456)},
        id="syslog-iso",
    ),
    pytest.param(
        b"2025-05-28T03:35:37.857Z ERROR engine.run_mp_engine: CUDA error: peer access is not supported\n",
        "CUDA error: peer access is not supported",
        {"host": None, "time": utc(2025, 5, 28, 3, 35, 37, 0.857)},
        id="iso-level-logger-is-no-host",
    ),
    pytest.param(
        b"[12345.678901] NVRM: Xid (PCI:0000:3b:00): 79\n",
        "NVRM: Xid (PCI:0000:3b:00): 79",
        {},
        id="dmesg-uptime",
    ),
    pytest.param(
        b"[Sat Nov 29 03:11:40 2025] NVRM: Xid 48\n",
        "NVRM: Xid 48",
        {"time": utc(2025, 11, 29, 3, 11, 40)},
        id="dmesg-wall-time",
    ),
    pytest.param(
        b"2024-05-01T03:11:40.123Z [rank3]: hello\n",
        "hello",
        {"rank": 3, "time": utc(2024, 5, 1, 3, 11, 40, 0.123)},
        id="kubectl-timestamp",
    ),
    pytest.param(
        b"2019-06-02T16:13:44.884Z: [1,12]<stdout>:ctr-57:815:864 [0] net_ib.cu:80 NCCL WARN NET/IB\n",
        "net_ib.cu:80 NCCL WARN NET/IB",
        {"rank": 12, "host": "ctr-57", "pid": 815, "time": utc(2019, 6, 2, 16, 13, 44, 0.884)},
        id="mpirun-timestamp-output",
    ),
    pytest.param(
        b"[  +0.000213] pcieport 0000:00:03.0: AER: Corrected error received\n",
        "pcieport 0000:00:03.0: AER: Corrected error received",
        {},
        id="dmesg-relative",
    ),
    pytest.param(
        b"[8d6bf97c3bf4:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)\n",
        "Caught signal 7 (Bus error: nonexistent physical address)",
        {"host": "8d6bf97c3bf4", "pid": 3039},
        id="ucx-crash-report",
    ),
    pytest.param(
        b"[PG ID 0 PG GUID 0(default_pg) Rank 7] Watchdog caught\n",
        "[PG ID 0 PG GUID 0(default_pg) Rank 7] Watchdog caught",
        {"rank": 7},
        id="default-pg-rank-is-global",
    ),
    pytest.param(
        b"[PG ID 2 PG GUID 3(tp) Rank 1] Watchdog caught\n",
        "[PG ID 2 PG GUID 3(tp) Rank 1] Watchdog caught",
        {},
        id="other-pg-rank-is-local",
    ),
    pytest.param(
        b"  time      : 2024-05-01_03:11:40\n",
        "  time      : 2024-05-01_03:11:40",
        {"time": utc(2024, 5, 1, 3, 11, 40)},
        id="child-failed-time",
    ),
]


@pytest.mark.parametrize(("raw", "text", "attrs"), CASES)
def test_prefix_forms(raw: bytes, text: str, attrs: dict[str, object]) -> None:
    line = parse_line(raw, PLAIN, 42, year=2024)
    assert line.text == text
    assert (line.source, line.lineno) == ("job.log", 42)
    assert line.raw == raw.decode().rstrip("\n")
    for name in ("rank", "local_rank", "host", "pid"):
        assert getattr(line, name) == attrs.get(name), name
    expected_time = attrs.get("time")
    if expected_time is None:
        assert line.time is None
    else:
        assert line.time == pytest.approx(expected_time, abs=1e-6)


def test_source_hints_fill_what_the_line_does_not_say() -> None:
    line = parse_line(b"RuntimeError: CUDA error: out of memory\n", HINTED, 1)
    assert (line.rank, line.host) == (9, "node-017")
    tagged = parse_line(b"[rank3]:gpu-a:1:2 [0] NCCL INFO x\n", HINTED, 1)
    assert (tagged.rank, tagged.host) == (3, "gpu-a")


def test_year_is_inferred_when_missing_and_never_in_the_future() -> None:
    import time

    line = parse_line(b"[rank0]:[E101 00:00:00.000000000 x.cpp:1] msg\n", PLAIN, 1)
    assert line.time is not None
    assert line.time <= time.time() + 86_400
    assert time.time() - line.time < 366 * 86_400


def test_invalid_dates_give_no_time_and_no_error() -> None:
    line = parse_line(b"[rank0]:[E1399 25:61:00.0 x.cpp:1] msg\n", PLAIN, 1)
    assert (line.text, line.time, line.rank) == ("msg", None, 0)


def test_decoding_crlf_ansi_nul_and_invalid_utf8() -> None:
    line = parse_line(b"\x1b[1;31m[rank1]: \xffbad\x00 utf8\x1b[0m\r\n", PLAIN, 1)
    assert (line.text, line.rank) == ("\ufffdbad utf8", 1)


def test_progress_bar_rewrites_keep_the_message() -> None:
    raw = (
        b"Epoch 0:   5%|\xe2\x96\x88      | 50/1000 [00:09<02:50,  5.5it/s]\r"
        b"Epoch 0:   6%|\xe2\x96\x88      | 60/1000 [00:10<02:40,  5.8it/s, loss=1.2]"
        b"[rank0]:[E1129 03:11:40.0 ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout\n"
    )
    line = parse_line(raw, PLAIN, 7)
    assert (line.text, line.rank, line.lineno) == ("Watchdog caught collective operation timeout", 0, 7)


def test_only_a_progress_bar_gives_empty_text() -> None:
    line = parse_line(b"\r 10%|#         | 1/10 [00:01<00:09,  1.00it/s]\r", PLAIN, 1)
    assert line.text == ""


def test_spliced_lines_of_two_ranks() -> None:
    raw = b"[rank0]: Traceback (most rec[rank3]:[E1129 03:11:40.0 x.cpp:1] Watchdog caught collective\n"
    last = parse_line(raw, PLAIN, 1)
    assert (last.rank, last.text) == (3, "Watchdog caught collective")
    segments = parse_segments(raw, PLAIN, 1)
    assert [(s.rank, s.text) for s in segments] == [
        (0, "Traceback (most rec"),
        (3, "Watchdog caught collective"),
    ]


def test_nccl_header_spliced_after_text_is_split() -> None:
    raw = b"{'loss': 1.25}gpu-b:77:78 [1] NCCL INFO Channel 00/0\n"
    segments = parse_segments(raw, PLAIN, 1)
    assert [(s.host, s.text) for s in segments] == [
        (None, "{'loss': 1.25}"),
        ("gpu-b", "NCCL INFO Channel 00/0"),
    ]


def test_stacked_prefixes_are_not_mistaken_for_splices() -> None:
    segments = parse_segments(b"3: [default3]:[rank3]: boom\n", PLAIN, 1)
    assert [(s.rank, s.local_rank, s.text) for s in segments] == [(3, 3, "boom")]


def test_raw_is_capped_and_text_is_not() -> None:
    raw = b"[rank1]: " + b"x" * 10_000 + b"\n"
    line = parse_line(raw, PLAIN, 1)
    assert len(line.raw) == RAW_CAP
    assert line.text == "x" * 10_000


@pytest.mark.parametrize(
    "raw",
    [b"", b"\n", b"\r\r\r\n", b"\x00" * 10, b"[rank]: x", b"[rank99999999999]: x", b"\xff" * 50, b"(pid=) x"],
)
def test_degenerate_lines_never_raise(raw: bytes) -> None:
    line = parse_line(raw, PLAIN, 1)
    assert isinstance(line.text, str)
    assert parse_segments(raw, PLAIN, 1)


def test_source_year_fills_formats_without_one() -> None:
    dated = Source("d.log", opener=lambda: io.BytesIO(b""), year=2023)  # type: ignore[arg-type, return-value]
    line = parse_line(b"[rank0]:[E1230 23:59:59.5 x.cpp:1] msg\n", dated, 1)
    assert line.time == pytest.approx(utc(2023, 12, 30, 23, 59, 59, 0.5))
    assert parse_line(b"[rank0]:[E1230 23:59:59.5 x.cpp:1] msg\n", dated, 1, year=2021).time == pytest.approx(
        utc(2021, 12, 30, 23, 59, 59, 0.5)
    )


def test_slurm_label_is_not_a_rank_when_the_source_says_labels_count_nodes() -> None:
    nodes = Source("n.out", opener=lambda: io.BytesIO(b""), labels_are_ranks=False)  # type: ignore[arg-type, return-value]
    line = parse_line(b"1: gpu-b:77:78 [3] NCCL WARN NET/IB : Got completion with error 12\n", nodes, 5)
    assert (line.rank, line.host, line.text) == (
        None,
        "gpu-b",
        "NCCL WARN NET/IB : Got completion with error 12",
    )
    assert parse_line(b"1: [rank9]: boom\n", nodes, 6).rank == 9


def test_bracketed_timestamp_glued_to_the_next_tag() -> None:
    line = parse_line(b"[2024-05-01 03:11:40,123][INFO] hello\n", PLAIN, 1)
    assert (line.text, line.time) == ("[INFO] hello", pytest.approx(utc(2024, 5, 1, 3, 11, 40, 0.123)))
