"""Slurm host lists expand as Slurm expands them, and compress back to the same hosts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.jobs.model import JobError
from bot.jobs.slurm.hostlist import MAX_HOSTS, compress, expand


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("localhost", ["localhost"]),
        ("gpu-node-[017-019,021]", ["gpu-node-017", "gpu-node-018", "gpu-node-019", "gpu-node-021"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("rack[1-2]-gpu[01-02]", ["rack1-gpu01", "rack1-gpu02", "rack2-gpu01", "rack2-gpu02"]),
        ("a1,b[2-3],a1", ["a1", "b2", "b3"]),
        (" login1 , login2 ", ["login1", "login2"]),
    ],
)
def test_host_lists_expand_like_slurm(text: str, hosts: list[str]) -> None:
    assert expand(text) == hosts


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("n[1-", "without ']'"),
        ("n1]", "without '['"),
        ("n[[1]]", "nested"),
        ("n[a-b]", "not a number"),
        ("n[5-2]", "backwards"),
        (f"n[0-{MAX_HOSTS}]", "more than"),
        ("a[0-999]b[0-999]", "more than"),
    ],
)
def test_malformed_or_huge_host_lists_are_refused(text: str, reason: str) -> None:
    with pytest.raises(JobError, match=re.escape(reason)):
        expand(text)


def test_compress_folds_consecutive_numbers_of_one_width() -> None:
    hosts = ["gpu-node-017", "gpu-node-018", "gpu-node-019", "gpu-node-021", "login", "n9", "n10"]
    assert compress(hosts) == "gpu-node-[017-019,021],login,n9,n10"


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["gpu-", "n", "rack1-node"]), st.integers(0, 300), st.sampled_from([1, 2, 3])
        ),
        min_size=1,
        max_size=40,
    )
)
def test_compress_then_expand_gives_the_same_hosts(parts: list[tuple[str, int, int]]) -> None:
    hosts = list(dict.fromkeys(f"{prefix}{number:0{width}d}" for prefix, number, width in parts))
    assert sorted(expand(compress(hosts))) == sorted(hosts)
