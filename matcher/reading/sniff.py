"""What a byte stream is, judged from its first bytes only (magic numbers, then a text/binary test).

Kinds: "empty", the single-stream compressions "gzip" "zstd" "xz" "bzip2", the archives "zip" "tar",
"flight-recorder" (a pickle, or JSON with `version` and `entries`/`pg_config`; a later loader validates),
"utf16" (text with a byte order mark, transcoded by the reader), "binary", "text".
File names are never consulted: dumps and bundles often have none that helps.
"""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal[
    "empty", "gzip", "zstd", "xz", "bzip2", "zip", "tar", "flight-recorder", "utf16", "binary", "text"
]

SNIFF_BYTES = 64 * 1024
COMPRESSIONS = frozenset({"gzip", "zstd", "xz", "bzip2"})
ARCHIVES = frozenset({"zip", "tar"})

_MAGIC: tuple[tuple[bytes, Kind], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),  # an empty zip: only the end-of-central-directory record
    # Text with a UTF-16 byte order mark: what Windows PowerShell's `>` writes.
    (b"\xff\xfe", "utf16"),
    (b"\xfe\xff", "utf16"),
)
_PICKLE_PROTOCOLS = frozenset({2, 3, 4, 5})
# Control bytes that never occur in text logs (tab, newline, CR, form feed, backspace, ESC do).
_CONTROL = bytes(b for b in range(32) if b not in (8, 9, 10, 12, 13, 27)) + b"\x7f"
_DELETE_CONTROL = bytes.maketrans(b"", b"")


def sniff(head: bytes) -> Kind:
    if not head:
        return "empty"
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    if len(head) >= 2 and head[0] == 0x80 and head[1] in _PICKLE_PROTOCOLS:
        return "flight-recorder"
    if _looks_like_json_dump(head):
        return "flight-recorder"
    return "binary" if looks_binary(head) else "text"


def _looks_like_json_dump(head: bytes) -> bool:
    if head.lstrip()[:1] != b"{":
        return False
    return b'"version"' in head and (b'"entries"' in head or b'"pg_config"' in head)


def looks_binary(head: bytes) -> bool:
    """Many control bytes, or mostly invalid UTF-8: not something a person would call a log.

    NUL bytes are not counted: a file cut by a crash or preallocated by a logger is padded with them,
    whatever its size, and the reader drops them. The judgement is on the rest; a head with nothing but
    NUL carries no text.
    """
    sample = head[:SNIFF_BYTES].replace(b"\x00", b"")
    if not sample:
        return True
    controls = len(sample) - len(sample.translate(_DELETE_CONTROL, _CONTROL))
    if controls > 0.05 * len(sample):
        return True
    # Cut a possibly split multi-byte character at the end before judging the encoding.
    text = (
        sample[:-4].decode("utf-8", errors="replace")
        if len(sample) > 8
        else sample.decode("utf-8", errors="replace")
    )
    return text.count("\ufffd") > 0.1 * max(len(text), 1)


# A Slurm `--label` task id followed by a torchrun tee tag or by a different `[rankN]:`.
_LABEL_THEN_TAG = re.compile(rb"(?m)^ {0,8}(\d{1,6}): \[(?:rank(\d{1,6})|[A-Za-z_][\w-]{0,40}?\d{1,6})\]:")


def slurm_labels_are_ranks(head: bytes) -> bool:
    """False when the head shows srun launching a per-node launcher (torchrun): its task ids then
    number nodes, not ranks. True otherwise (srun starting one task per rank, or no labels at all)."""
    if b": [" not in head:  # no label followed by a tag anywhere: skip the line-by-line search
        return True
    for count, match in enumerate(_LABEL_THEN_TAG.finditer(head)):
        if match.group(2) is None or match.group(2) != match.group(1):
            return False
        if count > 1000:
            break
    return True
