"""The format-only template language: syntax, quoting rule, and what values may become."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runbooks import template
from runbooks.values import MAX_VALUE_CHARS, command_value, prepare, text_value


def test_parse_splits_literals_and_placeholders() -> None:
    segments = template.parse("Drain {culprit_host|the node} now ({xid})")
    assert segments[0] == "Drain "
    assert isinstance(segments[1], template.Placeholder)
    assert (segments[1].name, segments[1].fallback) == ("culprit_host", "the node")
    assert segments[2] == " now ("
    assert isinstance(segments[3], template.Placeholder) and segments[3].fallback is None
    assert segments[4] == ")"


def test_doubled_braces_are_literal() -> None:
    segments = template.parse("awk '{{print $1}}'")
    assert segments == ("awk '{print $1}'",)


def test_empty_fallback_is_kept_as_empty_text() -> None:
    (placeholder,) = template.placeholders(template.parse("{rank|}"))
    assert placeholder.fallback == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("open {culprit_host", "unclosed"),
        ("close } here", "unmatched"),
        ("{Culprit}", "bad field name"),
        ("{culprit.__class__}", "bad field name"),
        ("{values[0]}", "bad field name"),
        ("{a|b{c}", "nested"),
        ("{}", "bad field name"),
    ],
)
def test_malformed_templates_are_refused(text: str, message: str) -> None:
    with pytest.raises(template.TemplateError, match=message):
        template.parse(text)


@pytest.mark.parametrize(
    "command",
    [
        "scontrol update Reason='{culprit_host}'",
        'echo "node {node}"',
        "ssh x 'journalctl -k' \"{node}\"",
    ],
)
def test_placeholders_inside_quotes_are_refused_in_commands(command: str) -> None:
    with pytest.raises(template.TemplateError, match="inside"):
        template.check_command(template.parse(command))


@pytest.mark.parametrize(
    "command",
    [
        "ssh {node} 'journalctl -k | grep -i xid'",
        "scontrol update NodeName={node} Reason=xid-{xid|unknown}",
        'echo "it\'s" {node}',
        "echo \\' {node}",
    ],
)
def test_placeholders_outside_quotes_are_accepted(command: str) -> None:
    template.check_command(template.parse(command))


def test_fill_resolves_each_placeholder() -> None:
    segments = template.parse("{a|x}-{b}")
    assert template.fill(segments, lambda p: p.name.upper()) == "A-B"


@given(st.text(max_size=200))
def test_text_values_are_one_short_printable_line(raw: str) -> None:
    cleaned = text_value(raw)
    if cleaned is None:
        return
    assert len(cleaned) <= MAX_VALUE_CHARS
    assert cleaned == cleaned.strip()
    assert not any(ord(char) < 32 or 0x7F <= ord(char) < 0xA0 for char in cleaned)
    assert "\x1b" not in cleaned


@given(st.text(max_size=100))
def test_command_values_are_single_safe_words_or_refused(raw: str) -> None:
    word = command_value(raw)
    if word is None:
        return
    assert shlex.split(word) == [raw]
    assert not raw.startswith("-")
    assert not set(raw) & set(" \t\n;|&$`'\"<>(){}*?[]\\!#~")


@pytest.mark.parametrize(
    "hostile",
    [
        "gpu-1; rm -rf ~",
        "$(reboot)",
        "`id`",
        "-oProxyCommand=sh",
        "a b",
        "node\nrm -rf /",
        "x" * (MAX_VALUE_CHARS + 1),
        "",
    ],
)
def test_hostile_command_values_are_refused(hostile: str) -> None:
    assert command_value(hostile) is None


@pytest.mark.parametrize(
    "safe", ["gpu-node-017", "10.0.0.5", "eth0", "2.21.5+cuda12.4", "0000:18:00.0", "17"]
)
def test_ordinary_values_pass_unchanged(safe: str) -> None:
    assert command_value(safe) == safe


def test_prepare_derives_timeout_node_and_xid_meaning() -> None:
    values = prepare({"timeout_ms": 1800000, "host": "gpu-7", "xid": 79, "rank": 3})
    assert values["timeout_min"] == "30"
    assert values["timeout_human"] == "30 minutes"
    assert values["node"] == "gpu-7"
    assert values["xid_meaning"] == "GPU has fallen off the bus"
    assert values["rank"] == "3"


def test_prepare_prefers_the_culprit_host_and_handles_short_timeouts() -> None:
    values = prepare({"culprit_host": "gpu-1", "host": "gpu-2", "timeout_ms": 90000})
    assert values["node"] == "gpu-1"
    assert values["timeout_human"] == "90 seconds"
    assert values["timeout_min"] == "1.5"


@pytest.mark.parametrize("bad", [{"timeout_ms": "soon"}, {"timeout_ms": -5}, {"xid": 99999}, {"xid": True}])
def test_prepare_skips_values_it_cannot_interpret(bad: dict[str, object]) -> None:
    values = prepare(bad)  # type: ignore[arg-type]
    assert "timeout_human" not in values and "xid_meaning" not in values


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("10.0.0.5<38217>", "10.0.0.5"),
        ("gpu-3:29500", "gpu-3"),
        ("[fe80::1]:29500", "fe80::1"),
        ("fe80::1", "fe80::1"),
        ("ip-172-31-45-209.eu-north-1.compute.internal", "ip-172-31-45-209.eu-north-1.compute.internal"),
    ],
)
def test_prepare_takes_the_host_out_of_a_peer_address(peer: str, host: str) -> None:
    assert prepare({"peer": peer})["peer_host"] == host


def test_prepare_ignores_fields_outside_the_vocabulary() -> None:
    assert prepare({"password": "x", "culprit_rank": 5}) == {"culprit_rank": "5"}
