"""The hostile inputs of issue 9 part A as files, for the server's ways in (a Slack upload, the
webhook's inline log): what each is, its bytes, and whether a diagnosis or a one-line refusal is the
right answer. The CLI's own tests of the same inputs are tests/cli/test_hostile_input.py and friends;
their timing and memory are benchmarks/hostile_inputs.py."""

from __future__ import annotations

import gzip
import io
import json
import pickle
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tests.cli.test_hostile_input import SECRETS
from tests.fixtures.hostile_files import (
    fr_billion_laughs,
    fr_self_reference,
    fr_shared_entries,
    repeat_central_directory,
)

OOM = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
# What a terminal acts on (ESC, C1 CSI, BEL, bidi override and isolate) and what Slack acts on.
CONTROLS = ("\x1b", "\x9b", "\x07", "\u202e", "\u2066")
MRKDWN_ACTIVE = ("<!channel>", "<!here>", "<!everyone>", "<@U0BOSS>", "<#C0SECRET>", "<https://evil.example")
LEAKS = (*SECRETS.values(), "pw0rd1", *CONTROLS, *MRKDWN_ACTIVE)


@dataclass(frozen=True)
class Hostile:
    name: str
    filename: str
    make: Callable[[], bytes]
    diagnosed: str | None  # the class a diagnosis must name; None: refused in one line


def _secrets() -> bytes:
    s = SECRETS
    return (
        f"{OOM} app={s['xapp']} aws {s['aws']} redis://:{s['redis']}@redis:6379 "
        f"AccountName=a;AccountKey={s['azure']};EndpointSuffix=x --password {s['flag']} "
        f"{s['npm']} PASSWORD={s['short']}\n"
    ).encode()


def _peer_password() -> bytes:
    return (
        b"gpu-node-001:1:1 [0] NCCL WARN NET/IB : Got completion from peer https://u:pw0rd1@10.0.0.2<45678> "
        b"with status=12 opcode=0 len=0 vendor err 129\n"
    )


def _hostile_host() -> bytes:
    host = "gpu1\x9b31m\u202e[link=https://evil.example]click[/link]<!channel>\u2066"
    return (
        f"{OOM}\nRoot Cause (first observed failure):\n[0]:\n  time      : 2026-11-29_03:11:45\n"
        f"  host      : {host}\n  rank      : 3 (local_rank: 3)\n  exitcode  : 1 (pid: 30257)\n"
    ).encode()


def _mrkdwn_injection() -> bytes:
    return (
        f"{OOM} <!channel> <!here> <!everyone> <@U0BOSS> <#C0SECRET> <https://evil.example|click me> "
        "```end of block``` *bold* \x1b[31mred\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07 "
        "\u202egnp.exe \x9b2J\n"
    ).encode()


def _timeout(digits: int) -> Callable[[], bytes]:
    def make() -> bytes:
        return (
            "[rank0]:[E ProcessGroupNCCL.cpp:1 ] [PG 0 Rank 0] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={'9' * digits}) "
            "ran for 5 milliseconds before timing out.\n"
        ).encode()

    return make


def _nul_padded() -> bytes:
    return OOM.encode() + b"\n" + b"\x00" * 4096


def _cut_tar() -> bytes:
    """A tar.gz cut in the middle of a big member: what is there is still read."""
    body = (
        "".join(f"[rank3]: step {i} loss 2.{i % 100:02d}\n" for i in range(20_000)) + OOM + "\n" * 2
    ).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("attempt_0/3/stderr.log")
        data = (OOM + "\n").encode() + body
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue()
    return gzip.compress(raw[: len(raw) * 2 // 3])


def _gzip_bomb() -> bytes:
    """1 GiB of zeros in about a megabyte of gzip: refused as a compression bomb."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as archive:
        chunk = b"\x00" * (1 << 20)
        for _ in range(1024):
            archive.write(chunk)
    return out.getvalue()


def _zip_duplicate_entries() -> bytes:
    """One compressed member of 16 MiB of text, listed 2,000 times in the central directory (each entry
    pointing at the same data): 32 GB of output from 160 KB unless each is read once."""
    member = zipfile.ZipInfo("rank3.log")
    member.compress_type = zipfile.ZIP_DEFLATED
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(member, (OOM + "\n").encode() * ((16 << 20) // len(OOM)))
    return repeat_central_directory(buffer.getvalue(), 2000)


def _many_members() -> bytes:
    """A tar.gz of 100,001 empty members: refused on the count, early."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        for index in range(100_001):
            archive.addfile(tarfile.TarInfo(f"r{index}"), io.BytesIO(b""))
    return buffer.getvalue()


def _long_lines() -> bytes:
    """Twenty 64 KB lines that look like the costly signatures' prefixes, then the real failure."""
    lines = [("torch version " + "9." * 32_000) for _ in range(10)]
    lines += [("NCCL RAS peer " + "dead " * 13_000) for _ in range(10)]
    return ("\n".join(lines) + "\n" + OOM + "\n").encode()


def _fr(document: Callable[[], dict[str, Any]], compress: bool = False) -> Callable[[], bytes]:
    def make() -> bytes:
        data = pickle.dumps(document(), protocol=2)
        return gzip.compress(data, 9) if compress else data

    return make


def _malicious_pickle() -> bytes:
    """A pickle that would run a command if unpickled: never run (read as text, nothing in it)."""
    return b"cos\nsystem\n(S'touch /tmp/ncclbot-pwned'\ntR."


INPUTS: tuple[Hostile, ...] = (
    Hostile("secrets-in-a-line", "rank3.log", _secrets, "cuda/oom"),
    Hostile("password-in-a-peer-url", "rank0.log", _peer_password, "network/ib-rdma"),
    Hostile("hostile-culprit-host", "rank3.log", _hostile_host, "cuda/oom"),
    Hostile("mrkdwn-and-terminal-injection", "rank3.log", _mrkdwn_injection, "cuda/oom"),
    Hostile("20-digit-timeout", "rank0.log", _timeout(20), "unknown"),
    Hostile("400-digit-timeout", "rank0.log", _timeout(400), "unknown"),
    Hostile("nul-padded-log", "rank3.log", _nul_padded, "cuda/oom"),
    Hostile("tar-cut-mid-member", "bundle.tar.gz", _cut_tar, "cuda/oom"),
    Hostile("gzip-bomb", "rank0.log.gz", _gzip_bomb, None),
    Hostile("zip-duplicate-entries", "bundle.zip", _zip_duplicate_entries, "cuda/oom"),
    Hostile("tar-of-100001-members", "many.tar.gz", _many_members, None),
    Hostile("64-kb-lines", "rank3.log", _long_lines, "cuda/oom"),
    Hostile("fr-self-reference", "nccl_trace_rank_0", _fr(fr_self_reference), "unknown"),
    Hostile("fr-billion-laughs", "nccl_trace_rank_1", _fr(fr_billion_laughs), "unknown"),
    Hostile("fr-shared-entries-gz", "nccl_trace_rank_2.gz", _fr(fr_shared_entries, compress=True), None),
    Hostile("malicious-pickle", "nccl_trace_rank_5", _malicious_pickle, "unknown"),
)


def leaks(text: str, *, mrkdwn: bool = True) -> list[str]:
    """Secrets, control characters and (where Slack reads `text` as mrkdwn) live mentions or links found
    in a bot's post."""
    found = [item for item in LEAKS if item in text and (mrkdwn or item not in MRKDWN_ACTIVE)]
    return found


def strings(value: object, *, live: bool = True) -> Iterator[tuple[str, bool]]:
    """Every string in a call's parameters (JSON-encoded ones such as blocks decoded), with whether
    Slack interprets mrkdwn in it: not in `plain_text` objects (button labels, headers) nor in data that
    is never shown (button values, metadata)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            yield value, live
            return
        if isinstance(decoded, (dict, list)):
            yield from strings(decoded, live=live)
        else:
            yield value, live
    elif isinstance(value, dict):
        plain = value.get("type") == "plain_text"
        for key, item in value.items():
            yield from strings(
                item, live=live and not plain and key not in ("value", "metadata", "action_id")
            )
    elif isinstance(value, list):
        for item in value:
            yield from strings(item, live=live)
