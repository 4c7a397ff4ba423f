"""Diagnosis values as they enter a runbook: derived fields, clean text, shell-safe command words.

Values come from logs, so they are hostile until proven otherwise. In prose they are reduced to one
short printable line (no control characters, no terminal escapes). In commands only a conservative
set of characters is accepted (host names, ranks, interface names, versions, PCI ids); anything else
counts as missing and the neutral fallback is used, so a host called `x; rm -rf ~` or `-oProxyCommand=...`
can never become part of a suggested command.
"""

from __future__ import annotations

import math
import re
import shlex
import unicodedata
from collections.abc import Mapping

from matcher.analysis.addresses import is_placeholder_host
from matcher.analysis.redact import redact
from matcher.model import KNOWN_FIELDS, FieldValue

CULPRIT_FIELDS = frozenset({"culprit_host", "culprit_rank"})

# Values computed here from the diagnosis' facts so that templates stay free of logic.
DERIVED_FIELDS = frozenset(
    {
        "timeout_min",  # timeout_ms in minutes ("30", "0.5")
        "timeout_human",  # timeout_ms in words ("30 minutes", "90 seconds")
        "node",  # the culprit host, else the host named by the primary evidence
        "xid_meaning",  # short description of a known Xid code
        "peer_host",  # the host part of `peer` ("10.0.0.5<38217>" -> "10.0.0.5")
    }
)

PLACEHOLDER_FIELDS: frozenset[str] = KNOWN_FIELDS | CULPRIT_FIELDS | DERIVED_FIELDS

# A value longer than this is cut (prose) or refused (commands); the executive-summary length check
# assumes every value can be this long.
MAX_VALUE_CHARS = 64

_COMMAND_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@%+=,/-]*\Z")

# Neutral wording for a missing value, per context. A placeholder without its own fallback uses these.
TEXT_FALLBACKS: Mapping[str, str] = {
    "culprit_host": "the failing node",
    "culprit_rank": "the failing rank",
    "node": "the failing node",
    "host": "the node named in the logs",
    "rank": "the failing rank",
    "local_rank": "the failing local rank",
    "pg_rank": "the failing rank",
    "other_rank": "another rank",
    "pg": "the affected process group",
    "device": "the affected GPU",
    "seqnum": "the stuck collective",
    "optype": "collective",
    "timeout_human": "the configured timeout",
    "interface": "the interface NCCL picked",
    "ip": "the address in the logs",
    "port": "the port in the logs",
    "peer": "the remote peer",
    "peer_host": "the remote peer",
    "xid_meaning": "a GPU fault",
    "nccl_version": "the NCCL version in use",
    "cuda_version": "the CUDA version in use",
    "driver_version": "the installed driver",
    "torch_version": "the PyTorch version in use",
    "exit_code": "a non-zero code",
    "error_code": "the reported error",
    "gid_index": "the configured GID index",
    "job_id": "the failed job",
}

COMMAND_FALLBACKS: Mapping[str, str] = {
    "culprit_host": "<node>",
    "node": "<node>",
    "host": "<node>",
    "culprit_rank": "<rank>",
    "rank": "<rank>",
    "local_rank": "<local-rank>",
    "device": "<gpu-index>",
    "interface": "<ifname>",
    "ip": "<ip>",
    "port": "<port>",
    "gid_index": "<gid-index>",
    "job_id": "<job-id>",
    "world_size": "<nproc>",
    "timeout_min": "<minutes>",
    "xid": "<xid>",
    "peer_host": "<peer-node>",
}

# Short meanings of the Xids a runbook most often meets (NVIDIA Xid catalog; wording ours).
XID_MEANINGS: Mapping[int, str] = {
    8: "GPU stopped processing",
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing (application fault)",
    45: "cleanup after an earlier error",
    48: "uncorrectable double-bit ECC error",
    61: "GPU micro-controller warning",
    62: "GPU micro-controller halt",
    63: "ECC page retirement or row remapping event",
    64: "ECC page retirement or row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP firmware RPC timeout",
    120: "GSP firmware error",
    149: "NVLink fabric link event",
    154: "GPU recovery action required",
}


_HOST_VALUES = ("culprit_host", "host", "node", "peer", "peer_host", "ip")

# NCCL writes socket addresses as host<port>; others write host:port or [ipv6]:port.
_PEER_PORT = re.compile(r"^\[?(?P<host>[^\[\]<>]+?)\]?(?:<\d+>|(?<!:):\d+)?$")
# A peer written as a URL (`https://user:password@10.0.0.2`): the host is what follows the scheme and the
# userinfo, so that neither ever reaches a suggested command.
_URL_AUTHORITY = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#]*@)?(?P<authority>[^/?#@]*)")


def _peer_host(peer: str) -> str | None:
    peer = peer.strip()
    url = _URL_AUTHORITY.match(peer)
    if url:
        peer = url.group("authority")
    match = _PEER_PORT.match(peer)
    if not match:
        return None
    # A bare IPv6 address keeps its colons: only a single colon before the final digits is a port.
    return match.group("host") or None


# A log can say `Timeout(ms)=` followed by hundreds of digits: such a number is no value worth showing
# (and Python refuses to print ints beyond 4300 digits, or to turn them into floats past 1e308).
_MAX_DIGITS = 30


def _format_number(value: float) -> str:
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return f"{value:.1f}"


def _as_string(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value) if abs(value) < 10**_MAX_DIGITS else None
    if isinstance(value, float):
        return _format_number(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return value
    return None


def _as_float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) >= 10**_MAX_DIGITS:
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except (ValueError, OverflowError):
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _timeout_words(milliseconds: float) -> str:
    seconds = milliseconds / 1000
    if seconds >= 120:
        minutes = seconds / 60
        return f"{_format_number(round(minutes, 1))} minutes"
    return f"{_format_number(round(seconds, 1))} seconds"


def prepare(facts: Mapping[str, FieldValue]) -> dict[str, str]:
    """The placeholder values for one diagnosis: known facts as strings plus derived fields."""
    values: dict[str, str] = {}
    for name, raw in facts.items():
        text = _as_string(raw)
        if name in PLACEHOLDER_FIELDS and name not in DERIVED_FIELDS and text is not None and text.strip():
            values[name] = text
    timeout_ms = _as_float(facts.get("timeout_ms"))
    if timeout_ms is not None and timeout_ms > 0:
        values["timeout_min"] = _format_number(round(timeout_ms / 60000, 1) or 0.1)
        values["timeout_human"] = _timeout_words(timeout_ms)
    node = values.get("culprit_host") or values.get("host")
    if node:
        values["node"] = node
    peer_host = _peer_host(values["peer"]) if "peer" in values else None
    if peer_host:
        values["peer_host"] = peer_host
    # Loopback and masked addresses name no machine: `ssh 127.0.0.1 ...` would inspect the wrong one.
    for name in _HOST_VALUES:
        host = _peer_host(values[name]) if name in values else None
        if host is not None and is_placeholder_host(host):
            del values[name]
    xid = _as_float(facts.get("xid"))
    if xid is not None and xid == int(xid) and int(xid) in XID_MEANINGS:
        values["xid_meaning"] = XID_MEANINGS[int(xid)]
    return values


def text_value(raw: str) -> str | None:
    """One printable line of at most MAX_VALUE_CHARS without credentials, or None when nothing printable
    is left."""
    kept = []
    for char in redact(raw):
        category = unicodedata.category(char)
        if category in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}:
            kept.append(" ")
        else:
            kept.append(char)
    cleaned = " ".join("".join(kept).split())
    if not cleaned:
        return None
    if len(cleaned) > MAX_VALUE_CHARS:
        cleaned = cleaned[: MAX_VALUE_CHARS - 1] + "…"
    return cleaned


def command_value(raw: str) -> str | None:
    """The value as one shell word, or None when it is not plainly safe to put into a command (a URL, or
    anything that carries a credential, is not)."""
    if len(raw) > MAX_VALUE_CHARS or not _COMMAND_SAFE.match(raw) or "://" in raw or redact(raw) != raw:
        return None
    return shlex.quote(raw)
