"""The in-memory outlet behaves like the contract says: posts, thread replies, updates, idempotency keys."""

from __future__ import annotations

import pytest

from bot.services.outlet import InMemoryOutlet, Message, MessageRef


def test_replies_are_kept_apart_from_top_level_messages() -> None:
    outlet = InMemoryOutlet()
    parent = outlet.post("C1", Message(text="incident"))
    outlet.post("C1", Message(text="evidence"), thread=parent)
    assert [p.message.text for p in outlet.top_level("C1")] == ["incident"]
    assert [p.message.text for p in outlet.replies(parent)] == ["evidence"]


def test_update_replaces_the_current_message() -> None:
    outlet = InMemoryOutlet()
    ref = outlet.post("C1", Message(text="Reading 1.2 GB…"))
    outlet.update(ref, Message(text="cuda/oom on gpu-node-02"))
    assert outlet.top_level()[0].current.text == "cuda/oom on gpu-node-02"


def test_a_key_posted_before_returns_the_earlier_message() -> None:
    outlet = InMemoryOutlet()
    first = outlet.post("C1", Message(text="a"), key="job-1:0")
    again = outlet.post("C1", Message(text="a"), key="job-1:0")
    assert first == again and len(outlet.posted) == 1


def test_updating_an_unknown_message_fails_loudly() -> None:
    with pytest.raises(KeyError):
        InMemoryOutlet().update(MessageRef("C1", "1.2"), Message(text="x"))
