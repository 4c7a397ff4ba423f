"""Every root signature is still found when its log line reaches the matcher the way real logs do.

Logs in issue threads, chat pastes and CI output are rarely clean files: they are quoted in Markdown,
HTML-escaped, wrapped by a terminal, coloured, wrapped in a log collector's record or prefix, redacted.
Each test here takes the first `match` example of every root signature in the catalog, renders it in one
such form, diagnoses it like a pasted file (stdin: a source given on its own), and checks that the same
signature is found and the same primary class comes first as for the clean line.

A form a signature cannot survive for a reason that is no reading or catalog fault (the words it needs
are gone) is listed in KNOWN_LIMITS with its reason, and checked as a strict xfail: the day it passes,
the list must shrink.
"""

from __future__ import annotations

import io
import json
import re
import textwrap
from collections.abc import Callable
from functools import cache

import pytest

from matcher.analysis.addresses import is_placeholder_host
from matcher.analysis.analyze import analyze
from matcher.reading.prefixes import parse_line
from matcher.reading.read import Source, clean_block, iter_blocks, iter_sources
from matcher.scanning.catalog import Signature, load_catalog
from matcher.scanning.rejoin import wrapped_runs
from matcher.scanning.scan import scan

Form = Callable[[str], str]


def _per_line(render: Callable[[str], str]) -> Form:
    return lambda text: "\n".join(render(line) for line in text.split("\n"))


def _prefixed(prefix: str) -> Form:
    return _per_line(lambda line: prefix + line)


def _html_escaped(text: str) -> str:
    # What a page's source or a mangled Markdown export holds.
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


def _folded(width: int) -> Form:
    """A terminal's hard wrap (`fold -w`): every `width` characters, the rest on the next line."""

    def render(text: str) -> str:
        out: list[str] = []
        for line in text.split("\n"):
            while len(line) > width:
                out.append(line[:width])
                line = line[width:]
            out.append(line)
        return "\n".join(out)

    return render


def _word_wrapped(width: int) -> Form:
    """An editor's or mail client's wrap: at a space (eaten), long words broken."""

    def render(text: str) -> str:
        out: list[str] = []
        for line in text.split("\n"):
            out.extend(textwrap.wrap(line, width, break_on_hyphens=False) or [line])
        return "\n".join(out)

    return render


_BARS = "\r".join(f"{10 * i:3d}%|{'█' * i:<10}| {10 * i}/100 [00:0{i}<00:10,  9.87it/s]" for i in range(1, 4))


def _coloured(line: str) -> str:
    line = re.sub(r"\b(WARN|ERROR|Error|error|failed)\b", "\x1b[1;31m\\1\x1b[0m", line, count=1)
    return "\x1b[33m" + line + "\x1b[0m"


def _zero_width(line: str) -> str:
    # A byte order mark in front, a zero-width space inside every word of eight letters or more.
    return "\ufeff" + re.sub(r"([A-Za-z]{4})([A-Za-z]{4,})", "\\1\u200b\\2", line)


_FULL_WIDTH = str.maketrans({":": "：", ",": "，", "(": "（", ")": "）", ";": "；", "!": "！", "?": "？"})


def _docker(text: str) -> str:
    # Docker's json-file driver writes UTF-8 as it is (Go's encoder escapes only <, > and &), so no
    # \\uXXXX escapes for non-ASCII text here.
    return "\n".join(
        json.dumps(
            {"log": line + "\n", "stream": "stderr", "time": "2024-05-01T10:00:00.123456789Z"},
            ensure_ascii=False,
        )
        for line in text.split("\n")
    )


def _go_escaped(text: str) -> str:
    # What Go's encoding/json makes of a record (Docker's daemon, promtail): <, > and & as \\u escapes.
    return _docker(text).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _ascii_json(text: str) -> str:
    # Python's json.dumps default (a logging JSON formatter): every non-ASCII character as a \\u escape.
    return "\n".join(json.dumps({"message": line, "level": "ERROR"}) for line in text.split("\n"))


_IPV4 = re.compile(r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d.])")


def _masked_ips(token: str) -> Form:
    # Users mask the addresses that identify their machines; loopback and link-local name none.
    return lambda text: _IPV4.sub(
        lambda m: m.group(0) if m.group(0).startswith(("127.", "169.254.")) else token, text
    )


_NCCL_HOST = re.compile(r"(?m)^[A-Za-z][\w.-]{0,62}(?=:\d+:\d+ \[\d+\])")
_HOST_NAME = re.compile(r"\b(?:[a-z][a-z0-9]*-)+\d+\b|\b(?:gpu|node|host|worker|trainer)[a-z-]*\d+\b")


def _masked_hosts(token: str) -> Form:
    return lambda text: _HOST_NAME.sub(token, _NCCL_HOST.sub(token, text))


_PCI = re.compile(r"PCI:(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?")
_PATH = re.compile(r"(?<![\w.])(/(?:[\w.+-]+/){2,})([\w.+-]+)")


def _elided_paths(token: str) -> Form:
    return lambda text: _PATH.sub(lambda m: f"{token}/{m.group(2)}", text)


def _truncated(width: int, mark: str) -> Form:
    return _per_line(lambda line: line if len(line) <= width else line[:width] + mark)


FORMS: dict[str, Form] = {
    # GitHub / Markdown
    "quoted": _prefixed("> "),
    "quoted-twice": _prefixed(">> "),
    "fenced": lambda text: f"```\n{text}\n```",
    "fenced-with-language": lambda text: f"```text\n{text}\n```",
    "fenced-in-a-quote": lambda text: "> ```\n" + _prefixed("> ")(text) + "\n> ```",
    "in-details": lambda text: f"<details><summary>Full log</summary>\n\n```\n{text}\n```\n\n</details>",
    "in-bare-details": lambda text: f"<details>\n<summary>log</summary>\n{text}\n</details>",
    "indented-code-block": _prefixed("    "),
    "html-escaped": _html_escaped,
    "dash-bullet": _prefixed("- "),
    "star-bullet": _prefixed("* "),
    # terminals and viewers
    "crlf": lambda text: text.replace("\n", "\r\n") + "\r",
    "ansi-colours": _per_line(_coloured),
    "folded-at-80": _folded(80),
    "folded-at-100": _folded(100),
    "folded-at-120": _folded(120),
    "word-wrapped-at-80": _word_wrapped(80),
    "word-wrapped-at-100": _word_wrapped(100),
    "word-wrapped-at-120": _word_wrapped(120),
    "progress-redrawn-after": _per_line(lambda line: f"{line}\r{_BARS}"),
    "progress-redrawn-before": _per_line(lambda line: f"{_BARS}\r{line}"),
    "tab-indented": _prefixed("\t"),
    "tab-aligned": _per_line(lambda line: re.sub(r"  +", "\t", line)),
    "no-break-spaces": lambda text: text.replace(" ", "\u00a0"),
    "zero-width-characters": _per_line(_zero_width),
    "full-width-punctuation": lambda text: text.translate(_FULL_WIDTH),
    "typographic-quotes": lambda text: re.sub(r"'([^']*)'", "\u2018\\1\u2019", text).replace('"', "\u201d"),
    # log collectors and launchers
    "docker-json-lines": _docker,
    "docker-json-lines-go-escaped": _go_escaped,
    "json-lines-ascii-escaped": _ascii_json,
    "cri-containerd": _prefixed("2024-05-01T10:00:00.123456789Z stderr F "),
    "kubectl-timestamps": _prefixed("2024-05-01T10:00:00.123456789Z "),
    "kubectl-prefix": _prefixed("[pod/trainer-worker-3/pytorch] "),
    "github-actions": _prefixed("2024-05-01T10:00:00.1234567Z "),
    "gitlab-ci": _prefixed("2024-05-01T10:00:00.123456Z 00O "),
    "journalctl-short-iso": _prefixed("2024-05-01T10:00:00+0000 gpu-node-017 python[4120]: "),
    "journalctl-short-precise": _prefixed("May 01 10:00:00.123456 gpu-node-017 python[4120]: "),
    "dmesg-wall-time": _prefixed("[Wed May  1 10:00:00 2024] "),
    "dmesg": _prefixed("[12345.678901] "),
    "syslog": _prefixed("May  1 10:00:00 gpu-node-017 python[4120]: "),
    "slurm-label": _prefixed("3: "),
    "slurm-label-padded": _prefixed("  3: "),
    "torchrun-tee": _prefixed("[default0]:"),
    "deepspeed-mpi": _prefixed("[1,0]<stderr>:"),
    "pdsh-host": _prefixed("node-3: "),
    "pdsh-address": _prefixed("10.0.0.3: "),
    "ray-worker": _prefixed("(RayTrainWorker pid=123, ip=10.0.0.2) "),
    # redaction
    "ip-as-10-x": _masked_ips("10.x.x.x"),
    "ip-as-xxx": _masked_ips("xxx.xxx.xxx.xxx"),
    "ip-as-stars": _masked_ips("*.*.*.*"),
    "ip-as-tag": _masked_ips("<IP>"),
    "host-as-tag": _masked_hosts("<hostname>"),
    "host-as-node-xxx": _masked_hosts("node-XXX"),
    "host-as-stars": _masked_hosts("****"),
    "pci-as-dots": lambda text: _PCI.sub("PCI:...", text),
    "pci-as-xx": lambda text: _PCI.sub("PCI:0000:xx:00.0", text),
    "path-elided-dots": _elided_paths("..."),
    "path-elided-brackets": _elided_paths("[...]"),
    "path-elided-ellipsis": _elided_paths("…"),
    "truncated-at-200": _truncated(200, "…"),
    "truncated-at-200-with-note": _truncated(200, " ... (truncated)"),
}

_CUT_REMOTE_GID = "the cut at 200 characters removes the remote GID the class is told by"
# (form, signature id) -> why that signature cannot survive that form.
KNOWN_LIMITS: dict[tuple[str, str], str] = {
    (form, signature): _CUT_REMOTE_GID
    for form in ("truncated-at-200", "truncated-at-200-with-note")
    for signature in ("ib-modify-qp-no-route", "ib-modify-qp-timeout-between-ipv4-gids")
}

CATALOG = load_catalog()
SOURCE = Source(name="paste.log", opener=lambda: io.BytesIO(b""))
ROOTS: tuple[Signature, ...] = tuple(s for s in CATALOG if s.role == "root")


def _read(text: str) -> tuple[frozenset[str], str]:
    """Signatures found and the primary class, for text pasted on its own (stdin)."""
    scanned = scan(iter_sources(["-"], stdin=io.BytesIO((text + "\n").encode())), CATALOG, None, None)
    return frozenset(o.signature for o in scanned.observations), analyze(scanned).primary.class_id


@cache
def _clean(signature_id: str) -> tuple[frozenset[str], str]:
    return _read(CATALOG.by_id(signature_id).match[0])


def _lost(form: str, signature: Signature) -> str | None:
    """Why the rendered example reads differently from the clean one; None when it does not."""
    found, primary = _read(FORMS[form](signature.match[0]))
    if signature.id not in found:
        return f"{signature.id}: not found"
    want = _clean(signature.id)[1]
    return None if primary == want else f"{signature.id}: primary {primary}, clean {want}"


def test_every_clean_root_example_is_found_on_its_own() -> None:
    assert [s.id for s in ROOTS if s.id not in _clean(s.id)[0]] == []


@pytest.mark.parametrize("form", FORMS)
def test_root_signatures_survive_the_pasted_form(form: str) -> None:
    rendered = [s for s in ROOTS if FORMS[form](s.match[0]) != s.match[0]]
    assert rendered, f"{form} changes no example: the form tests nothing"
    lost = [why for s in rendered if (form, s.id) not in KNOWN_LIMITS and (why := _lost(form, s)) is not None]
    assert lost == []


@pytest.mark.parametrize(
    ("form", "signature_id"),
    [
        pytest.param(form, signature_id, marks=pytest.mark.xfail(strict=True, reason=reason))
        for (form, signature_id), reason in KNOWN_LIMITS.items()
    ],
)
def test_known_limitation_still_holds(form: str, signature_id: str) -> None:
    assert _lost(form, CATALOG.by_id(signature_id)) is None


# ---- the reading behaviours the forms above rely on -------------------------------------------------


def test_pasted_characters_are_undone_when_a_block_is_read() -> None:
    pasted = (
        "a&lt;b&gt; &quot;c&#39;\tx\u00a0y\u200bz\ufeff"
        + "\uff1a\uff0c\uff08q\uff09 \u2018s\u2019 \u201cd\u201d\n"
    )
    assert clean_block(pasted.encode(), 1024, pasted=True) == b"a<b> \"c' x yz:,(q) 's' \"d\"\n"


def test_machine_written_lines_are_left_as_they_are() -> None:
    line = b"gpu-node-017:2319:2319 [0] NCCL INFO Channel 00/32 :    0   1   2   3 \xe2\x96\x88 & more\n"
    assert clean_block(line, 1024, pasted=True) == line


def test_a_pdsh_host_prefix_names_the_host() -> None:
    line = parse_line(
        b"node-3: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", SOURCE, 1
    )
    assert line.host == "node-3"
    assert line.text.startswith("NVRM: Xid")


@pytest.mark.parametrize(
    "raw",
    [
        b"RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
        b"libnccl.so.2: cannot open shared object file: No such file or directory",
        b"python3: can't open file 'train.py': [Errno 2] No such file or directory",
    ],
)
def test_an_exception_or_library_name_is_no_pdsh_host(raw: bytes) -> None:
    line = parse_line(raw, SOURCE, 1)
    assert line.host is None
    assert line.text == raw.decode()


def test_a_wrap_is_joined_only_where_the_match_crosses_it() -> None:
    # `ib-verbs-call-failed` gives way to `ibv-create-failed-bare` when nothing follows `failed`: a
    # following line glued on must not turn the lookahead around.
    text = (
        "ws-gpu-4:7001:7102 [2] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_create_cq failed\n"
        "see https://docs.example.org/ib-setup for the memlock limits of the container\n"
    )
    found, _ = _read(text)
    assert "ibv-create-failed-bare" in found
    assert "ib-verbs-call-failed" not in found


def test_machine_written_records_are_never_taken_for_a_wrap() -> None:
    lines = [
        b"gpu-node-017:2319:2319 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.17<0> and some more text",
        b"gpu-node-017:2319:2319 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.17<0>",
        b"[rank0]:[E1129 03:11:40.611181197 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective",
        b"2024-05-01T10:00:00.123Z stderr F [rank1]: torch.distributed.DistBackendError: NCCL error",
    ]
    assert wrapped_runs(lines) == []


@pytest.mark.parametrize("host", ["*.*.*.*", "10.0.*.*", "<IP>", "<hostname>", "node-XXX", "****"])
def test_a_masked_address_or_host_names_no_machine(host: str) -> None:
    assert is_placeholder_host(host)


@pytest.mark.parametrize("host", ["node-3", "gpu-node-017", "10.0.0.2", "xr-7"])
def test_a_real_host_is_no_placeholder(host: str) -> None:
    assert not is_placeholder_host(host)


def test_paste_characters_are_undone_only_where_a_paste_can_be() -> None:
    # The first MiB of a file or stream given on its own; never a bundle's file (machine-written).
    data = "gpu-node-017:1:2 [0] NCCL WARN Cuda\u00a0failure\n".encode()
    alone = Source(name="paste.log", opener=lambda: io.BytesIO(data))
    bundled = Source(name="b.tar!0/stderr.log", opener=lambda: io.BytesIO(data), bundled=True)
    assert b"".join(b.data for b in iter_blocks(alone)) == data.replace("\u00a0".encode(), b" ")
    assert b"".join(b.data for b in iter_blocks(bundled)) == data


def test_json_escapes_become_their_characters_unless_that_would_break_the_record() -> None:
    line = (
        b'{"log":"object \\u003c/torch_1_2\\u003e \\u0026 \\u5185\\u5b58 '
        b'kept: \\\\u003c \\u0022 \\u005c \\u000a \\ud83d\\ude00"}\n'
    )
    cleaned = clean_block(line, cap=4096)
    kept = b'kept: \\\\u003c \\u0022 \\u005c \\u000a \\ud83d\\ude00"}\n'
    assert cleaned == '{"log":"object </torch_1_2> & 内存 '.encode() + kept
    assert json.loads(cleaned) == json.loads(line)  # the record reads as before, character for character
