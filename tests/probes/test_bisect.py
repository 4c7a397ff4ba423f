"""Bisection as pure logic against a fake probe: which nodes it names and how many rounds it takes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes.bisect import bisect


def fake_probe(bad: set[str], calls: list[list[str]]):
    def probe(nodes: list[str]) -> bool:
        calls.append(nodes)
        return not (bad & set(nodes))

    return probe


@given(n=st.integers(min_value=2, max_value=64), data=st.data())
def test_one_bad_node_is_found_in_at_most_log2_n_rounds(n: int, data: st.DataObject) -> None:
    nodes = [f"node{i:02d}" for i in range(n)]
    culprit = data.draw(st.sampled_from(nodes))
    calls: list[list[str]] = []
    outcome = bisect(nodes, fake_probe({culprit}, calls))
    assert outcome.bad == [culprit]
    assert outcome.whole_set_healthy is False
    assert outcome.rounds <= math.ceil(math.log2(n))
    # A round probes the two halves of one split: two probes per round plus the confirmation.
    assert len(calls) == 1 + 2 * outcome.rounds


def test_halves_are_probed_together_and_recursed_into() -> None:
    calls: list[list[str]] = []
    outcome = bisect(["a", "b", "c", "d"], fake_probe({"c"}, calls))
    assert calls == [["a", "b", "c", "d"], ["a", "b"], ["c", "d"], ["c"], ["d"]]
    assert [(s.round, s.healthy) for s in outcome.steps] == [
        (0, False),
        (1, True),
        (1, False),
        (2, False),
        (2, True),
    ]


def test_two_bad_nodes_in_different_halves_are_both_found() -> None:
    outcome = bisect([f"n{i}" for i in range(8)], fake_probe({"n1", "n6"}, []))
    assert sorted(outcome.bad) == ["n1", "n6"]


def test_a_healthy_set_stops_after_the_confirmation() -> None:
    calls: list[list[str]] = []
    outcome = bisect(["a", "b", "c"], fake_probe(set(), calls))
    assert outcome.whole_set_healthy is True
    assert outcome.bad == [] and calls == [["a", "b", "c"]]


def test_a_fault_between_halves_is_reported_unresolved_not_guessed() -> None:
    """Each half passes alone but the union fails (e.g. the link between two racks)."""

    def probe(nodes: list[str]) -> bool:
        return not ({"a", "d"} <= set(nodes))

    outcome = bisect(["a", "b", "c", "d"], probe)
    assert outcome.bad == []
    assert outcome.unresolved == [["a", "b", "c", "d"]]


@pytest.mark.parametrize("confirm", [True, False])
def test_single_suspect(confirm: bool) -> None:
    outcome = bisect(["only"], fake_probe({"only"}, []), confirm=confirm)
    assert outcome.bad == ["only"]
