"""The one-step attribution of plain NCCL lines gives exactly what peeling every prefix gives."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from matcher.reading import prefixes
from matcher.reading.read import Source

SOURCES = [
    Source("train.log", opener=lambda: io.BytesIO()),
    Source("node-3/rank7.log", opener=lambda: io.BytesIO(), rank=7, host="node-3"),
]
hosts = st.one_of(
    st.sampled_from(
        ["gpu-node-017", "ERROR", "INFO", "Nov", "V100", "I1129", "h%1", "A%A", "a.b-c_d", "9lives"]
    ),
    st.from_regex(r"[A-Za-z0-9][\w.%-]{0,70}", fullmatch=True),
)
messages = st.one_of(
    st.sampled_from(
        [
            "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
            "NCCL WARN Cuda failure 'out of memory'",
            "NCCL INFO [PG 0 Rank 5] comm 0x1 rank 5 nranks 8",
            "NCCL INFO time : 2024-01-01_03:00:00",
            "NCCL INFO x] NCCL y",
            "NCCL INFO spliced h:1:2 [3] NCCL WARN z",
            "NCCL INFO [rank3]: tagged",
            "NCCL INFO 88%|####      | 3/4",
        ]
    ),
    st.text(max_size=60).map(lambda tail: "NCCL INFO " + tail),
)
lines = st.builds(
    lambda host, pid, tid, dev, message, tail: (
        f"{host}:{pid}:{tid} [{dev}] {message}".encode("utf-8", "surrogatepass") + tail
    ),
    hosts,
    st.integers(0, 10**10),
    st.integers(0, 10**10),
    st.integers(0, 1000),
    messages,
    st.sampled_from([b"", b"\r", b"\xff", b"\x1b[0m", b"\x00", b"  "]),
)


@settings(max_examples=1500, deadline=None)
@given(raw=lines, source=st.sampled_from(SOURCES))
def test_plain_nccl_lines_are_attributed_as_peeling_every_prefix_would(raw: bytes, source: Source) -> None:
    quick = prefixes._plain_nccl_line(raw, source, 12)
    if quick is None:
        return  # not a plain NCCL line: the full peel handles it
    peeled = tuple(
        prefixes._attribute(f, source, 12, None) for f in prefixes._fragments(prefixes._decode(raw))
    )
    assert peeled == (quick,)


def test_only_plain_nccl_lines_take_the_one_step_path() -> None:
    source = SOURCES[0]
    plain = b"gpu-node-017:4120:4388 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC/read"
    line = prefixes._plain_nccl_line(plain, source, 1)
    assert line is not None and (line.host, line.pid, line.text[:9]) == ("gpu-node-017", 4120, "NCCL INFO")
    for other in (b"[rank3]:" + plain, plain + b"\r", b"ERROR:4120:4388 [3] NCCL INFO x", b"plain text"):
        assert prefixes._plain_nccl_line(other, source, 1) is None
