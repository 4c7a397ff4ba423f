"""Input side of the matcher: paths, folders, archives and stdin -> sources -> blocks of whole lines.

OWNER: reader helper. Interface (other stages rely on it):

- `ReadLimits`: caps (decompressed bytes, line bytes, archive members, block size); defaults overridable
  from the environment (NCCLBOT_MAX_INPUT_BYTES ...).
- `iter_sources(paths, limits, stdin=None) -> Iterator[Source]`: expands folders (sorted), archives
  (.gz .zst .zip .tar .tar.gz .tgz, detected by magic bytes, never extracted to disk), '-' for stdin.
  Infers rank/host hints from paths (attempt_0/3/stderr.log, rank3.log, slurm-123-4.out ...).
  Flight Recorder dumps are detected by content and yielded with kind="flight-recorder".
  Raises InputError (one line) for unusable input: missing path, binary non-log, empty, bombs, zip slip.
- `iter_blocks(source, limits) -> Iterator[Block]`: the decoded-later byte stream in blocks of whole lines
  (a block never splits a line; lines longer than max_line_bytes are cut), with the 1-based number of
  its first line. Memory stays bounded by the block size whatever the input size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Literal

SourceKind = Literal["text", "flight-recorder"]


@dataclass(frozen=True, slots=True)
class ReadLimits:
    max_input_bytes: int = 64 * 1024**3
    max_line_bytes: int = 64 * 1024
    max_archive_members: int = 100_000
    block_bytes: int = 4 * 1024**2


@dataclass(frozen=True, slots=True)
class Source:
    name: str
    opener: Callable[[], BinaryIO]
    rank: int | None = None
    host: str | None = None
    kind: SourceKind = "text"


@dataclass(frozen=True, slots=True)
class Block:
    source: Source
    data: bytes
    first_lineno: int


def iter_sources(
    paths: Sequence[str], limits: ReadLimits = ReadLimits(), stdin: BinaryIO | None = None
) -> Iterator[Source]:
    raise NotImplementedError


def iter_blocks(source: Source, limits: ReadLimits = ReadLimits()) -> Iterator[Block]:
    raise NotImplementedError
