"""Read-ahead of blocks in a helper thread: same items, same errors, and the reader stops with us."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from matcher.model import InputError
from matcher.scanning.prefetch import prefetched


def test_items_arrive_in_order_and_the_thread_ends() -> None:
    assert list(prefetched(iter(range(1000)), depth=3)) == list(range(1000))
    assert not [t for t in threading.enumerate() if t.name == "ncclbot-read-ahead"]


def test_reader_errors_reach_the_consumer_after_the_items_before_them() -> None:
    def failing() -> Iterator[int]:
        yield 1
        yield 2
        raise InputError("bundle.tar.gz: unreadable or corrupt data")

    seen: list[int] = []
    with pytest.raises(InputError, match="corrupt data"):
        for item in prefetched(failing()):
            seen.append(item)
    assert seen == [1, 2]


def test_stopping_early_closes_the_reader_in_its_own_thread() -> None:
    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            count = 0
            while True:
                count += 1
                yield count
        finally:
            closed.set()

    stream = prefetched(endless(), depth=2)
    assert [next(stream) for _ in range(5)] == [1, 2, 3, 4, 5]
    stream.close()
    assert closed.wait(5)
    assert not [t for t in threading.enumerate() if t.name == "ncclbot-read-ahead"]
