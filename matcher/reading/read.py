"""Input side of the matcher: paths, folders, archives and stdin -> sources -> blocks of whole lines.

- `ReadLimits`: caps (decompressed bytes of the whole input, line bytes, archive members, folder files,
  block size, expansion ratio). `max_input_bytes` defaults to env NCCLBOT_MAX_INPUT_BYTES, else 64 GiB.
- `iter_sources(paths, limits, stdin=None) -> Iterator[Source]`: files in the order given, folders walked
  in natural sorted order (`rank2` before `rank10`), archives expanded, '-' for stdin. Formats are detected
  by magic bytes (see `matcher.reading.sniff`), never by extension. Rank/host hints come from the path
  (`matcher.reading.pathhints`). Flight Recorder dumps are detected by content and yielded with
  kind="flight-recorder" (not unpickled here). Text sources also carry `year` (first dated timestamp
  in the file's head, for year-less formats) and `labels_are_ranks` (see `matcher.reading.prefixes`). UTF-16
  text with a byte order mark is transcoded to UTF-8. Names are made printable (one line).
- `iter_blocks(source, limits, span=None) -> Iterator[Block]`: the byte stream in blocks of whole lines.
- Plain files (read as they are) carry `path` and `size`: `plan_spans` cuts one into spans whose blocks,
  read one after the other with `iter_blocks(..., span=...)`, are exactly the whole file's, so that
  other processes can scan parts of it. A file's size counts against `max_input_bytes` as soon as it is
  reached. Files of a folder and archive members are `bundled` (never treated as pasted excerpts). A
  file given twice, or given and found again in a folder, is read once.

Archives: zip members in sorted order, tar members in archive order (a tar is read once, as a stream;
re-sorting would mean decompressing it again per member). Nothing is ever written to disk; member names
(`../../etc/passwd`, `/abs`) are only display names, `bundle.tar.gz!attempt_0/3/stderr.log`. Only regular
members are read (tar symlinks, hard links, devices, fifos are ignored). Nesting: one level — a compressed
file (.gz/.zst/.xz/.bz2) may hold a tar, an archive may hold compressed members; an archive inside an
archive, or compression inside compression, is skipped with a warning (logger "ncclbot.read").

Tar members stream: a member's `opener` gives the live stream while `iter_sources` is paused on it (the
normal `for source in iter_sources(...): for block in iter_blocks(source)` loop). Opened later, it
re-reads the archive from the start up to that member (files only; stdin cannot be re-read).

Refusals (`InputError`, one line): missing path, unreadable file named on the command line (inside a
folder it is skipped with a warning, I/O errors such as EIO included), folder without files or with more
than `max_folder_files` (refused while listing), zip on stdin, more decompressed bytes than
`max_input_bytes` (counted across the whole input), a stream expanding more than `max_ratio`:1 past 64 MiB,
a zip archive whose members together expand more than `max_ratio`:1 its size on disk past 64 MiB (declared
member sizes are not trusted; central-directory entries that point at data already read are skipped),
more than `max_archive_members` members (an uncompressed tar on disk is counted before any member is
read), corrupt compressed data, and at the end: nothing usable (every file empty, binary or skipped).
Binary files are skipped with a warning as long as something else is usable. A compressed stream or a
tar cut short ends cleanly with a warning, keeping all that is there (inside a cut member too).

Blocks and line numbers: `Block.data` holds whole `\\n`-terminated lines (a truncated last line gets a
`\\n`), about `block_bytes` each, and `first_lineno` is the 1-based number of its first line. Line numbers
are physical `\\n` lines, as an editor shows them. `\\r` is left in place (CRLF endings, tqdm `\\r`
rewrites): a physical line holding several `\\r` segments stays one line, and `matcher.reading.prefixes` picks
the segment that carries the message. NUL bytes and ANSI escape sequences are removed here (they would
break the scanner's literal prefilter), and so is what a paste does to text (tabs, HTML entities, no-break,
zero-width and full-width characters: see `clean_block`); none of it changes line numbers. A line longer
than `max_line_bytes` is cut to that length: its start is kept, except for a line of `\\r` rewrites, which
keeps its start and its last segments (the message after a long run of progress bars). Memory stays
bounded by about `2 * block_bytes + 3 * max_line_bytes` (one reusable read buffer, the block being handed
out, the two ends of an over-long line), whatever the input; the buffer starts at 64 KiB and grows only
for a source that fills it. Reads land straight in the buffer (`readinto`), so a block costs one copy on
its way out. `Block.consumed` counts the bytes read from the stream (what stats report), before lines are cut.
"""

from __future__ import annotations

import io
import logging
import os
import re
import stat
import sys
import tarfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import IO, BinaryIO, Literal, cast

from matcher.model import InputError
from matcher.reading.pathhints import hints_from_path
from matcher.reading.sniff import ARCHIVES, COMPRESSIONS, SNIFF_BYTES, Kind, slurm_labels_are_ranks, sniff
from matcher.reading.streams import (
    ByteBudget,
    CountingReader,
    GuardedReader,
    PrefixedReader,
    RatioGuard,
    TarMemberReader,
    Utf16ToUtf8Reader,
    as_binary,
    decompressor,
    one_line,
    read_head,
)
from matcher.reading.timestamps import year_hint

SourceKind = Literal["text", "flight-recorder"]

ENV_MAX_INPUT_BYTES = "NCCLBOT_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT_BYTES = 64 * 1024**3
STDIN_NAME = "<stdin>"
TAR_BUFFER = 64 * 1024  # tarfile copies its whole buffer on every read: small enough for many small members,
# large enough that a big member is not one Python call per 10 KiB (the default)

log = logging.getLogger("ncclbot.read")


def _max_input_bytes_from_env() -> int:
    value = os.environ.get(ENV_MAX_INPUT_BYTES, "").strip()
    if not value:
        return DEFAULT_MAX_INPUT_BYTES
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit <= 0:
        raise InputError(f"{ENV_MAX_INPUT_BYTES}={value!r} is not a positive number of bytes")
    return limit


@dataclass(frozen=True, slots=True)
class ReadLimits:
    max_input_bytes: int = field(default_factory=_max_input_bytes_from_env)
    max_line_bytes: int = 64 * 1024
    max_archive_members: int = 100_000
    max_folder_files: int = 100_000
    # 1 MiB beats 4-8 MiB by ~20% on a 400 MB log: a block is still in cache when the scanner reads it.
    block_bytes: int = 1024**2
    # Text logs rarely pass 100:1 even with gzip -9; deflate bombs sit near 1000:1.
    max_ratio: int = 250


@dataclass(frozen=True, slots=True)
class Source:
    name: str
    opener: Callable[[], BinaryIO]
    rank: int | None = None
    host: str | None = None
    kind: SourceKind = "text"
    # The first calendar year written near the start of the file, for timestamps that omit it.
    year: int | None = None
    # False when the file shows srun starting torchrun per node: Slurm `N: ` labels then count nodes.
    labels_are_ranks: bool = True
    # A plain file on disk, read as it is (no decompression, no transcoding), and its size when opened:
    # a scanner may read byte ranges of it itself (`iter_blocks(..., span=...)`), in another process too.
    path: str | None = None
    size: int | None = None
    # A file of a folder or a member of an archive: written by a machine, one of many, never a pasted
    # excerpt (hard-wrapped lines are re-joined only in a file or stream given on its own).
    bundled: bool = False


@dataclass(frozen=True, slots=True)
class Block:
    source: Source
    data: bytes
    first_lineno: int
    # Bytes of the stream read so far, when this block was cut: the last block's is what the source
    # holds (cut lines and removed NUL padding included), which `data` alone does not say.
    consumed: int
    # The lines in `data` (its newlines): counted once here, so that readers need not count them again.
    lines: int


Opener = Callable[[], BinaryIO]


def iter_sources(
    paths: Sequence[str], limits: ReadLimits | None = None, stdin: BinaryIO | None = None
) -> Iterator[Source]:
    limits = limits or ReadLimits()
    if not paths:
        raise InputError("no input given (pass files, folders, archives or '-' for stdin)")
    expander = _Expander(limits)
    for path in paths:
        if path == "-":
            yield from expander.stream(STDIN_NAME, stdin if stdin is not None else sys.stdin.buffer)
        else:
            yield from expander.path(path)
    expander.finish()


class _Expander:
    """Turns each input into sources, keeping the tallies that decide the end-of-input verdict."""

    def __init__(self, limits: ReadLimits) -> None:
        self.limits = limits
        self.budget = ByteBudget(limits.max_input_bytes)
        self.usable = 0
        self.empty: list[str] = []
        self.unusable: list[str] = []  # one-line reasons, in input order
        self.seen: dict[tuple[int, int], str] = {}  # (device, inode) of files read -> their name

    # ---- entry points -------------------------------------------------------------------------

    def path(self, path: str) -> Iterator[Source]:
        name = display_name(path)
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise InputError(f"{name}: no such file or directory") from None
        except OSError as error:
            raise InputError(f"{name}: cannot read ({one_line(error)})") from None
        if stat.S_ISDIR(info.st_mode):
            yield from self.folder(path)
        elif stat.S_ISREG(info.st_mode):
            yield from self.file(name, path)
        else:  # a fifo or device (`<(zcat ...)`, /dev/stdin): read once as a stream
            yield from self.stream(name, self._open(path, name))

    def folder(self, root: str) -> Iterator[Source]:
        files: list[tuple[str, str]] = []
        limit = self.limits.max_folder_files
        for directory, subdirs, names in os.walk(root, onerror=self._walk_error):
            subdirs.sort(key=natural_key)
            for name in sorted(names, key=natural_key):
                fs_path = os.path.join(directory, name)
                if os.path.isfile(fs_path):
                    files.append((display_name(os.path.normpath(fs_path)), fs_path))
            if len(files) > limit:  # refused while listing, before a byte is read
                raise InputError(f"{display_name(root)}: folder holds more than {limit} files")
        if not files:
            raise InputError(f"{display_name(root)}: folder has no files")
        for display, fs_path in files:
            yield from _bundled(self.file(display, fs_path, in_folder=True))

    def file(self, name: str, fs_path: str, in_folder: bool = False) -> Iterator[Source]:
        def open_raw() -> BinaryIO:
            return self._open(fs_path, name)

        if self._seen_before(fs_path, name):
            return

        try:
            head = self._sniff_head(open_raw, name)
        except InputError as error:
            if not in_folder:  # a file named on the command line must be readable
                raise
            self._skip(name, str(error))  # one unreadable file does not sink a folder of logs
            return
        kind = sniff(head)
        if kind in COMPRESSIONS:
            yield from self._compressed_file(name, kind, open_raw)
        elif kind == "zip":
            yield from self._zip(name, fs_path)
        elif kind == "tar":
            self._count_tar_members(name, fs_path)
            yield from self._tar(name, lambda: self._guard(open_raw(), name, charge=True), reopenable=True)
        else:
            yield from self._plain_file(name, fs_path, head, kind, open_raw)

    def _plain_file(
        self, name: str, fs_path: str, head: bytes, kind: Kind, open_raw: Opener
    ) -> Iterator[Source]:
        """A file read as it is: its size is charged against the input budget before a byte of it is
        read (so a too large input is refused at once), and its readers are not charged again."""
        sources = list(self._leaf(name, head, lambda: self._guard(open_raw(), name, charge=False), kind))
        for source in sources:
            try:
                size = os.stat(fs_path).st_size
            except OSError as error:
                raise InputError(f"{name}: cannot read ({one_line(error)})") from None
            self.budget.charge(size)
            yield (
                replace(source, path=fs_path, size=size)
                if source.kind == "text" and kind != "utf16"
                else source
            )

    def stream(self, name: str, raw: BinaryIO) -> Iterator[Source]:
        guarded = self._guard(raw, name, charge=False)
        head = read_head(guarded, SNIFF_BYTES)
        kind = sniff(head)
        rest = PrefixedReader(head, guarded)
        if kind == "zip":
            raise InputError(f"{name}: a zip archive needs random access; give it as a file, not a stream")
        if kind == "tar":
            yield from self._tar(name, _once(name, lambda: self._charged(rest, name)), reopenable=False)
            return
        if kind in COMPRESSIONS:
            counted = CountingReader(as_binary(rest))
            inner = self._guard(decompressor(kind, as_binary(counted)), name, charge=False, counted=counted)
            inner_head = read_head(inner, SNIFF_BYTES)
            inner_kind = sniff(inner_head)
            body = PrefixedReader(inner_head, inner)
            if inner_kind == "tar":
                yield from self._tar(name, _once(name, lambda: self._charged(body, name)), reopenable=False)
            elif inner_kind == "zip":
                raise InputError(f"{name}: a compressed zip archive cannot be read as a stream")
            else:
                yield from self._leaf(
                    name, inner_head, _once(name, lambda: self._charged(body, name)), inner_kind
                )
            return
        yield from self._leaf(name, head, _once(name, lambda: self._charged(rest, name)), kind)

    def _seen_before(self, fs_path: str, name: str) -> bool:
        """A file named twice, or named and also inside a folder given, is read once."""
        try:
            info = os.stat(fs_path)
        except OSError:
            return False  # reading it will say what is wrong
        key = (info.st_dev, info.st_ino)
        if key in self.seen:
            log.warning("%s: given more than once; read once (as %s)", name, self.seen[key])
            return True
        self.seen[key] = name
        return False

    def finish(self) -> None:
        if self.usable:
            return
        if self.unusable:
            raise InputError(self.unusable[0])
        if len(self.empty) == 1:
            raise InputError(f"{self.empty[0]} is empty")
        raise InputError(f"the input is empty ({len(self.empty)} empty files)")

    # ---- formats ------------------------------------------------------------------------------

    def _compressed_file(self, name: str, kind: Kind, open_raw: Opener) -> Iterator[Source]:
        def open_decompressed(charge: bool) -> BinaryIO:
            counted = CountingReader(open_raw())
            return self._guard(decompressor(kind, as_binary(counted)), name, charge=charge, counted=counted)

        inner_head = self._sniff_head(lambda: open_decompressed(False), name)
        inner = sniff(inner_head)
        if inner == "tar":
            yield from self._tar(name, lambda: open_decompressed(True), reopenable=True)
        elif inner == "zip" or inner in COMPRESSIONS:
            self._skip(name, f"{name}: skipped, {inner} inside {kind} (only one level of nesting is read)")
        else:
            yield from self._leaf(name, inner_head, lambda: open_decompressed(True), inner)

    def _tar(self, name: str, open_stream: Opener, reopenable: bool) -> Iterator[Source]:
        """Stream a tar (already decompressed and budget-charged by `open_stream`)."""
        stream = open_stream()
        try:
            archive = tarfile.open(fileobj=stream, mode="r|", bufsize=TAR_BUFFER)  # noqa: SIM115 - closed below
        except InputError:
            stream.close()
            raise
        except Exception as error:  # tarfile raises several types on garbage headers
            stream.close()
            raise InputError(f"{name}: not a readable tar archive ({one_line(error)})") from None
        cursor = _Cursor()
        members = 0
        try:
            while True:
                member = self._next_member(archive, name)
                if member is None:
                    break
                members += 1
                if members > self.limits.max_archive_members:
                    raise InputError(f"{name}: more than {self.limits.max_archive_members} archive members")
                cursor.index += 1
                archive.members.clear()  # type: ignore[attr-defined]  # tarfile keeps every header it read
                if not member.isreg():
                    continue
                yield from _bundled(self._tar_member(name, archive, member, cursor, open_stream, reopenable))
        finally:
            cursor.index = -1
            archive.close()
            stream.close()

    def _count_tar_members(self, name: str, fs_path: str) -> None:
        """An uncompressed tar on disk: its headers are walked first (seeking past the data, so this
        costs milliseconds), and one with too many members is refused before any member is read. A
        compressed or streamed tar can only be counted while it is read."""
        limit = self.limits.max_archive_members
        try:
            with tarfile.open(fs_path, mode="r:") as archive:
                for count, _ in enumerate(iter(archive.next, None), start=1):
                    if count > limit:
                        raise InputError(f"{name}: more than {limit} archive members")
        except InputError:
            raise
        except Exception:  # damaged or cut archive: the streaming read says what it can
            return

    def _next_member(self, archive: tarfile.TarFile, name: str) -> tarfile.TarInfo | None:
        try:
            return archive.next()
        except InputError:
            raise
        except Exception as error:
            log.warning("%s: archive ends early or is damaged (%s); keeping the members before", name, error)
            return None

    def _tar_member(
        self,
        archive_name: str,
        archive: tarfile.TarFile,
        member: tarfile.TarInfo,
        cursor: _Cursor,
        open_stream: Opener,
        reopenable: bool,
    ) -> Iterator[Source]:
        name = f"{archive_name}!{display_name(member.name)}"
        index = cursor.index
        try:
            extracted = _member_stream(archive, member, name)
        except Exception as error:  # e.g. a sparse or otherwise unsupported member in stream mode
            self._skip(name, f"{name}: skipped, unreadable archive member ({one_line(error)})")
            return
        if extracted is None:
            return
        raw = self._guard(as_binary(extracted), name, charge=False)
        head = read_head(raw, SNIFF_BYTES)
        kind = sniff(head)
        live_state = {"fresh": True}

        def unwrap_member(member_raw: BinaryIO, member_head: bytes) -> tuple[bytes, BinaryIO]:
            """One level of compression inside the archive; returns the content's head and stream."""
            if kind not in COMPRESSIONS:
                return member_head, member_raw
            counted = CountingReader(member_raw)
            inner = self._guard(decompressor(kind, as_binary(counted)), name, charge=True, counted=counted)
            inner_head = read_head(inner, SNIFF_BYTES)
            return inner_head, as_binary(PrefixedReader(inner_head, inner))

        def reopen() -> BinaryIO:
            if cursor.index == index and live_state["fresh"]:
                live_state["fresh"] = False
                return live_stream
            if not reopenable:
                raise InputError(f"{name}: members of a streamed archive must be read in order, once")
            return unwrap_member(self._seek_member(open_stream, index, name), b"")[1]

        content_head, live_stream = unwrap_member(as_binary(PrefixedReader(head, raw)), head)
        content_kind = sniff(content_head)
        if kind in COMPRESSIONS and (content_kind in ARCHIVES or content_kind in COMPRESSIONS):
            self._skip(name, f"{name}: skipped, nested {content_kind} inside an archive (one level is read)")
            return
        if kind in ARCHIVES:
            self._skip(name, f"{name}: skipped, an archive inside an archive (one level is read)")
            return
        yield from self._leaf(name, content_head, reopen, content_kind)

    def _seek_member(self, open_stream: Opener, index: int, name: str) -> BinaryIO:
        stream = open_stream()
        archive = tarfile.open(fileobj=stream, mode="r|", bufsize=TAR_BUFFER)  # noqa: SIM115 - member keeps it
        position = -1
        for member in archive:
            position += 1
            if position == index:
                extracted = _member_stream(archive, member, name)
                if extracted is not None:
                    return self._guard(as_binary(extracted), name, charge=False, closers=(stream,))
                break
        stream.close()
        raise InputError(f"{name}: member no longer found when re-reading the archive")

    def _zip(self, name: str, fs_path: str) -> Iterator[Source]:
        try:
            archive = zipfile.ZipFile(fs_path)
            infos = archive.infolist()
        except Exception as error:
            raise InputError(f"{name}: not a readable zip archive ({one_line(error)})") from None
        if len(infos) > self.limits.max_archive_members:
            archive.close()
            raise InputError(f"{name}: more than {self.limits.max_archive_members} archive members")
        regular = [info for info in infos if not info.is_dir() and not _zip_is_link(info)]
        guard = RatioGuard(name, os.path.getsize(fs_path), self.limits.max_ratio)
        first_at: dict[int, str] = {}  # local header offset -> the member name that points there
        try:
            for info in sorted(regular, key=lambda i: natural_key(i.filename)):
                if info.header_offset in first_at:
                    self._skip(
                        f"{name}!{display_name(info.filename)}",
                        f"{name}!{display_name(info.filename)}: skipped, the same data as "
                        f"{first_at[info.header_offset]} (a duplicate zip entry)",
                    )
                    continue
                first_at[info.header_offset] = display_name(info.filename)
                yield from _bundled(self._zip_member(name, fs_path, archive, info, guard))
        finally:
            archive.close()

    def _zip_member(
        self,
        archive_name: str,
        fs_path: str,
        archive: zipfile.ZipFile,
        info: zipfile.ZipInfo,
        guard: RatioGuard,
    ) -> Iterator[Source]:
        name = f"{archive_name}!{display_name(info.filename)}"

        def open_member(charge: bool) -> BinaryIO:
            # Reuse the open archive while iterating; a later call opens the zip again.
            owner = archive if archive.fp is not None else zipfile.ZipFile(fs_path)
            try:
                member = owner.open(info)
            except Exception as error:
                raise InputError(f"{name}: cannot read zip member ({one_line(error)})") from None
            # The ratio is checked for the whole archive against its size on disk (see RatioGuard): a
            # member's declared compressed size is the archive's word, not a measurement.
            return self._guard(as_binary(member), name, charge=charge, archive=guard)

        try:
            head = self._sniff_head(lambda: open_member(False), name)
        except InputError as error:
            self._skip(name, str(error))
            return
        kind = sniff(head)
        if kind in ARCHIVES:
            self._skip(name, f"{name}: skipped, an archive inside an archive (one level is read)")
            return
        if kind not in COMPRESSIONS:
            yield from self._leaf(name, head, lambda: open_member(True), kind)
            return

        def open_decompressed(charge: bool) -> BinaryIO:
            counted = CountingReader(open_member(False))
            return self._guard(decompressor(kind, as_binary(counted)), name, charge=charge, counted=counted)

        inner_head = self._sniff_head(lambda: open_decompressed(False), name)
        inner = sniff(inner_head)
        if inner in ARCHIVES or inner in COMPRESSIONS:
            self._skip(name, f"{name}: skipped, nested {inner} inside an archive (one level is read)")
            return
        yield from self._leaf(name, inner_head, lambda: open_decompressed(True), inner)

    # ---- leaves and helpers -------------------------------------------------------------------

    def _leaf(self, name: str, head: bytes, opener: Opener, kind: Kind | None = None) -> Iterator[Source]:
        """A readable stream: a Source if it is text or a Flight Recorder dump, else tallied (`kind`:
        what `sniff` said of `head`, when the caller has asked)."""
        if kind is None:
            kind = sniff(head)
        if kind == "utf16":
            opener = _transcoded(opener)
            head = head.decode("utf-16", errors="replace").encode("utf-8", errors="replace")
            kind = "text"
        if kind == "empty":
            self.empty.append(name)
            # A rank's own file that stayed empty still says something: that rank wrote nothing, while
            # its peers may have reported a failure. It is read (zero lines) but counts as no input.
            hints = hints_from_path(name)
            if hints.rank is not None:
                yield Source(name=name, opener=opener, rank=hints.rank, host=hints.host)
            return
        if kind in ARCHIVES or kind in COMPRESSIONS:
            self._skip(name, f"{name}: skipped, nested {kind} (one level of nesting is read)")
            return
        if kind != "text" and kind != "flight-recorder":
            self._skip(name, f"{name} is not a text log (binary data)")
            return
        hints = hints_from_path(name)
        self.usable += 1
        text = kind == "text"
        yield Source(
            name=name,
            opener=opener,
            rank=hints.rank,
            host=hints.host,
            kind=kind,
            year=year_hint(head) if text else None,
            labels_are_ranks=slurm_labels_are_ranks(head) if text else True,
        )

    def _skip(self, name: str, reason: str) -> None:
        log.warning("%s", reason)
        self.unusable.append(reason)

    def _guard(
        self,
        inner: BinaryIO,
        name: str,
        charge: bool,
        counted: CountingReader | None = None,
        compressed_size: Callable[[], int] | None = None,
        closers: tuple[BinaryIO, ...] = (),
        archive: RatioGuard | None = None,
    ) -> BinaryIO:
        if counted is not None:
            compressed_size = lambda: counted.count  # noqa: E731
        return as_binary(
            GuardedReader(
                inner,
                name,
                self.budget if charge else None,
                compressed_size=compressed_size,
                max_ratio=self.limits.max_ratio,
                closers=closers,
                archive=archive,
            )
        )

    def _charged(self, stream: PrefixedReader, name: str) -> BinaryIO:
        return self._guard(as_binary(stream), name, charge=True)

    def _sniff_head(self, opener: Opener, name: str) -> bytes:
        stream = opener()
        try:
            return read_head(stream, SNIFF_BYTES)
        except OSError as error:  # EIO and friends (`/proc/self/mem`, a failing disk): one line
            raise InputError(f"{name}: cannot read ({one_line(error)})") from None
        finally:
            stream.close()

    @staticmethod
    def _open(fs_path: str, name: str) -> BinaryIO:
        try:
            return open(fs_path, "rb")
        except OSError as error:
            raise InputError(f"{name}: cannot read ({one_line(error)})") from None

    @staticmethod
    def _walk_error(error: OSError) -> None:
        log.warning("%s: cannot list (%s)", error.filename, error.strerror)


@dataclass
class _Cursor:
    """Index of the tar member `iter_sources` is paused on (-1 once the archive is done)."""

    index: int = -1


def _bundled(sources: Iterator[Source]) -> Iterator[Source]:
    for source in sources:
        yield replace(source, bundled=True)


def _member_stream(archive: tarfile.TarFile, member: tarfile.TarInfo, name: str) -> BinaryIO | None:
    """A tar member's data. A plain member is read straight from the archive stream, so that a member
    cut short (a partial upload, a killed `tar`) keeps all that is there: tarfile's own reader drops a
    whole read, a block of up to a MiB, when the data ends inside it."""
    if not member.isreg() or member.issparse():
        extracted = archive.extractfile(member)
        return None if extracted is None else as_binary(extracted)
    return as_binary(TarMemberReader(cast(IO[bytes], archive.fileobj), member.offset_data, member.size, name))


def _once(name: str, make: Callable[[], BinaryIO]) -> Opener:
    used = False

    def opener() -> BinaryIO:
        nonlocal used
        if used:
            raise InputError(f"{name}: a stream can be read only once")
        used = True
        return make()

    return opener


def _transcoded(opener: Opener) -> Opener:
    return lambda: as_binary(Utf16ToUtf8Reader(opener()))


def _zip_is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def display_name(text: str) -> str:
    """A name safe to print on one line: control characters and undecodable bytes become U+FFFD."""
    return _UNPRINTABLE.sub("\ufffd", text)


def natural_key(text: str) -> tuple[tuple[int, str | int], ...]:
    """Sort key that orders embedded numbers by value: rank2 < rank10."""
    return tuple(
        (1, int(piece)) if index % 2 else (0, piece.lower())
        for index, piece in enumerate(re.split(r"(\d+)", text))
    )


# ---- blocks ------------------------------------------------------------------------------------

_FIRST_BUFFER_BYTES = 64 * 1024
# Full-size read buffers of finished sources, reused by the next ones (a bundle of a thousand files would
# otherwise allocate and zero a MiB a file); a few, so that memory stays bounded however many threads read.
_MAX_SPARE_BUFFERS = 2
_spare_buffers: list[bytearray] = []


def _buffer(full: int, expected: int | None) -> bytearray:
    """A read buffer for a stream of `expected` bytes (None: unknown). Small to start with for a stream
    of unknown size (most files of a bundle are small, and a full buffer per file costs more than reading
    it; it grows on the first read that fills it); the size it needs for a plain file, a spare full-size
    one where it needs all of it."""
    if expected is None or expected + 1 < full:
        return bytearray(min(full, _FIRST_BUFFER_BYTES if expected is None else expected + 1))
    try:
        spare = _spare_buffers.pop()  # atomic: threads may read sources side by side
    except IndexError:
        return bytearray(full)
    return spare if len(spare) == full else bytearray(full)


_ANSI = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


@dataclass(frozen=True, slots=True)
class Span:
    """Bytes [begin, end) of a plain file (`end` None: to its end), cut where reading the whole file
    would cut its blocks: `begin` starts a line, and full-size reads resume at `aligned`, the multiple of
    `block_bytes` that follows, so the blocks of consecutive spans are exactly those of the whole file."""

    begin: int
    end: int | None
    aligned: int


def plan_spans(source: Source, limits: ReadLimits, first_bytes: int, span_bytes: int) -> list[Span]:
    """Cuts a plain file (`source.path`) into spans: the first about `first_bytes`, the others about
    `span_bytes`. Each cut needs only the `max_line_bytes` before it; a cut where a longer line runs
    moves one block on. The cuts depend on the file alone, never on how many workers read it."""
    size = source.size or 0
    if source.path is None or size <= first_bytes:
        return [Span(0, None, 0)]
    block, cap = max(limits.block_bytes, 1), max(limits.max_line_bytes, 1)
    cuts: list[tuple[int, int]] = [(0, 0)]
    target = first_bytes
    try:
        with open(source.path, "rb") as stream:
            while target < size:
                aligned = -(-target // block) * block
                begin = -1
                while aligned < size and begin < 0:
                    low = max(aligned - cap, cuts[-1][0] + 1)
                    stream.seek(low)
                    newline = stream.read(aligned - low).rfind(b"\n")
                    if newline >= 0:
                        begin = low + newline + 1
                    else:
                        aligned += block
                if begin < 0:
                    break
                cuts.append((begin, aligned))
                target = aligned + span_bytes
    except OSError as error:
        raise InputError(f"{source.name}: cannot read ({one_line(error)})") from None
    ends: list[int | None] = [begin for begin, _ in cuts[1:]]
    return [Span(begin, end, aligned) for (begin, aligned), end in zip(cuts, [*ends, None], strict=True)]


def iter_blocks(
    source: Source, limits: ReadLimits | None = None, span: Span | None = None
) -> Iterator[Block]:
    """The source in blocks of whole lines; with `span`, only those bytes of a plain file (`source.path`),
    numbered from 1 as if they were a file of their own."""
    limits = limits or ReadLimits()
    if span is None:
        stream = source.opener()
    else:
        if source.path is None:
            raise ValueError("a span can only be read from a plain file")
        stream = as_binary(_SpanReader(_open_at(source, span.begin), span))
    # A plain file says how much it holds: its buffer is sized for it at once, not grown by doubling.
    expected = None
    if source.path is not None and source.size is not None:
        expected = source.size if span is None else (span.end or source.size) - span.begin
    blocker = _Blocker(
        source,
        stream,
        limits,
        first_read=(span.aligned - span.begin) if span else 0,
        expected=expected,
        paste_bytes=0 if source.bundled or (span is not None and span.begin) else PASTE_BYTES,
    )
    try:
        yield from blocker.blocks()
    finally:
        blocker.release()
        stream.close()


def read_lines_after(source: Source, offset: int, count: int, limits: ReadLimits) -> bytes:
    """Up to `count` whole lines of a plain file from `offset` (a line start), cleaned as blocks are:
    the continuation lines that a multi-line record at the end of a span needs."""
    if source.path is None or count <= 0:
        return b""
    cap = max(limits.max_line_bytes, 1)
    budget = (count + 1) * (cap + 1)
    with _open_at(source, offset) as stream:
        data = stream.read(budget)
    pieces = data.split(b"\n")
    lines = pieces[:-1]  # each was ended by a newline
    if len(data) < budget and pieces[-1]:  # the file's last line, without its newline
        lines.append(pieces[-1])
    return clean_block(b"".join(line + b"\n" for line in lines[:count]), cap)


def _open_at(source: Source, offset: int) -> BinaryIO:
    try:
        stream = open(source.path or "", "rb", buffering=0)  # noqa: SIM115 - closed by the caller
        stream.seek(offset)
    except OSError as error:
        raise InputError(f"{source.name}: cannot read ({one_line(error)})") from None
    return as_binary(stream)


class _SpanReader(io.RawIOBase):
    """A plain file from span.begin up to span.end; read errors become one-line InputErrors."""

    def __init__(self, inner: BinaryIO, span: Span) -> None:
        self.inner = inner
        self.left = None if span.end is None else span.end - span.begin
        self.name = getattr(inner, "name", "")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        want = len(buffer) if self.left is None else min(len(buffer), self.left)
        if want <= 0:
            return 0
        try:
            got = int(self.inner.readinto(buffer[:want]) or 0)  # type: ignore[attr-defined]
        except OSError as error:
            raise InputError(f"{self.name}: read failed ({one_line(error)})") from None
        if self.left is not None:
            self.left -= got
        return got

    def close(self) -> None:
        self.inner.close()
        super().close()


class _Blocker:
    """Cuts a stream into blocks of whole lines through one reusable buffer.

    Each read lands straight in the buffer, behind the start of a line carried over from the previous
    read (at most `cap` bytes), so a block costs one copy: from the buffer into the `bytes` it is handed
    out as. A line that outgrows `cap` before its newline arrives streams past as a `_LongLine`.
    """

    def __init__(
        self,
        source: Source,
        stream: BinaryIO,
        limits: ReadLimits,
        first_read: int = 0,
        expected: int | None = None,
        paste_bytes: int = 0,
    ) -> None:
        self.source = source
        # Reading a span: the first read stops where the whole file's reads are aligned (see Span).
        self.first_read = first_read
        self.stream = stream
        self.cap = max(limits.max_line_bytes, 1)
        self.size = max(limits.block_bytes, 1)
        self.buffer = _buffer(self.cap + self.size, expected)
        self.view = memoryview(self.buffer)
        self.filled = 0  # buffer[:filled]: the carried line start, then the latest read
        self.consumed = 0  # bytes read from the stream
        self.long_line: _LongLine | None = None
        self.paste_bytes = paste_bytes  # blocks starting before this offset may be a paste (clean_block)
        self.handed = 0  # bytes of whole lines handed out so far, before cleaning

    def blocks(self) -> Iterator[Block]:
        lineno = 1
        while self._next_read():
            block = self._take_whole_lines()
            if block:
                pasted = self.handed < self.paste_bytes
                self.handed += len(block)
                block = clean_block(block, self.cap, pasted)
                lines = count_lines(block)
                yield Block(self.source, block, lineno, self.consumed, lines)
                lineno += lines
        last = self._unfinished_line()
        if last:
            block = clean_block(last + b"\n", self.cap, self.handed < self.paste_bytes)
            yield Block(self.source, block, lineno, self.consumed, count_lines(block))

    def _unfinished_line(self) -> bytes:
        """What is left at the end of the stream: a last line without its newline."""
        if self.long_line is not None:
            return self.long_line.shortened()
        return bytes(self.view[: self.filled])

    def _next_read(self) -> bool:
        """Read more into the buffer (finishing a long line first); False at the end of the stream."""
        if self.long_line is not None:
            self._grow()
        while self.long_line is not None:
            got = _fill(self.stream, self.view[: self.size], self.source.name)
            self.consumed += got
            if not got:
                return False
            newline = self.buffer.find(b"\n", 0, got)
            self.long_line.extend(self.buffer, 0, got if newline < 0 else newline)
            if newline >= 0:
                head = self.long_line.shortened()
                rest = bytes(self.view[newline:got])
                self.long_line = None
                self.buffer[: len(head)] = head
                self.buffer[len(head) : len(head) + len(rest)] = rest
                self.filled = len(head) + len(rest)
                return True
        want, self.first_read = self.first_read or self.size, 0
        end = self.filled + want
        got = 0
        while True:  # one read of `want` bytes, the buffer doubling while it is too small for it
            room = min(end, len(self.buffer))
            got += _fill(self.stream, self.view[self.filled + got : room], self.source.name)
            if self.filled + got < room or room == end:  # the stream ended, or the read is complete
                break
            self._grow(len(self.buffer) * 2)
        self.consumed += got
        self.filled += got
        return got > 0

    def release(self) -> None:
        """The stream is done with: a full-size buffer is kept for the next source (see `_buffer`)."""
        self.view.release()
        if len(self.buffer) == self.cap + self.size and len(_spare_buffers) < _MAX_SPARE_BUFFERS:
            _spare_buffers.append(self.buffer)
        self.buffer = bytearray()
        self.view = memoryview(self.buffer)

    def _grow(self, size: int | None = None) -> None:
        """To `size` bytes (default: all the buffer ever needs, a block and a carried line)."""
        full = self.cap + self.size
        size = full if size is None else min(size, full)
        if len(self.buffer) < size:
            self.view.release()
            self.buffer.extend(bytes(size - len(self.buffer)))
            self.view = memoryview(self.buffer)

    def _take_whole_lines(self) -> bytes:
        """The buffer's whole lines as bytes; the unfinished line stays behind (or becomes a long line)."""
        filled = self.filled
        end = self.buffer.rfind(b"\n", 0, filled) + 1
        block = bytes(self.view[:end]) if end else b""
        rest = filled - end
        if rest > self.cap:
            self.long_line = _LongLine(self.buffer, end, filled, self.cap)
            self.filled = 0
        elif end and rest:
            self.buffer[:rest] = bytes(self.view[end:filled])  # a copy: the two ranges may overlap
            self.filled = rest
        elif end:
            self.filled = 0
        # No newline yet and still short: the whole buffer is the carried line; the next read appends.
        return block


def count_lines(data: bytes) -> int:
    """Newlines in `data`. `bytes.count` of one byte runs a plain loop (~3 GB/s here); removing them
    with `replace` runs memchr and memcpy (~7 GB/s), which matters at one call per block of every log."""
    return len(data) - len(data.replace(b"\n", b""))


def _fill(stream: BinaryIO, target: memoryview, name: str) -> int:
    """Read until `target` is full or the stream ends (pipes and decoders return short reads)."""
    got = 0
    while got < len(target):
        try:
            count = _read_into(stream, target[got:])
        except InputError:
            raise
        except Exception as error:  # a raw stream handed in by a caller; decoders are already guarded
            raise InputError(f"{name}: read failed ({one_line(error)})") from None
        if not count:
            break
        got += count
    return got


def _read_into(stream: BinaryIO, target: memoryview) -> int:
    """One read straight into `target`; a stream without `readinto` (BinaryIO does not promise it)
    is read the plain way."""
    readinto = getattr(stream, "readinto", None)
    if readinto is not None:
        return int(readinto(target) or 0)
    data = stream.read(len(target))
    target[: len(data)] = data
    return len(data)


class _LongLine:
    """A line longer than `cap`, kept as its first and last `cap` bytes while it streams past."""

    def __init__(self, buffer: bytearray, start: int, end: int, cap: int) -> None:
        self.cap = cap
        self.head = bytes(buffer[start : min(end, start + cap)])
        self.tail = b""
        self.has_cr = False
        self.extend(buffer, start, end)

    def extend(self, buffer: bytearray, start: int, end: int) -> None:
        """Takes in buffer[start:end], the next part of the line."""
        if end <= start:
            return
        self.has_cr = self.has_cr or buffer.find(b"\r", start, end) >= 0
        part = bytes(buffer[max(start, end - self.cap) : end])
        self.tail = part if len(part) >= self.cap else (self.tail + part)[-self.cap :]

    def shortened(self) -> bytes:
        return shorten_line(self.head, self.tail, self.has_cr, self.cap)


def shorten_line(head: bytes, tail: bytes, has_cr: bool, cap: int) -> bytes:
    """An over-long line cut to `cap` bytes.

    Normally its start (where prefixes and the message begin). A line of `\r` rewrites (tqdm bars
    followed by the real message) keeps its start and its last segments, joined by `\r`, because the
    message a terminal shows, and the one that matters, comes last.
    """
    if not has_cr:
        return head[:cap]
    half = cap // 2
    room = cap - half - 1
    ending = tail[len(tail) - room :] if room > 0 else b""
    first_cr = ending.find(b"\r")
    if first_cr >= 0:
        ending = ending[first_cr + 1 :]
    return head[:half] + b"\r" + ending


# What chat clients, browsers and input methods do to pasted text (see `clean_block`), as UTF-8 bytes.
# Led by a character class, which `re` scans for at C speed; it runs only on blocks that are not ASCII.
_PASTED = re.compile(
    rb"[\xc2\xe2\xe3\xef](?:(?<=\xc2)[\xa0\xad]|(?<=\xe2)(?:\x80[\x80-\x8d\x98\x99\x9c\x9d\xaf]|\x81[\x9f\xa0])"
    rb"|(?<=\xe3)\x80\x80|(?<=\xef)(?:\xbb\xbf|\xbc[\x81-\xbf]|\xbd[\x80-\x9e]))"
)
# Pasted excerpts are small: only the first bytes of a file or stream given on its own (never a bundle's
# files, nor the later spans of a large file) are looked at for them. Progress bars (`█`, U+2588) make
# most blocks of a training log non-ASCII; their lead byte `\xe2` is that of the no-break and zero-width
# characters too, so the test costs about 0.5 ms per MiB there (the others are memchr searches).
PASTE_BYTES = 1024**2
_PASTED_E2 = re.compile(rb"\xe2[\x80\x81]")
_QUOTES = {b"\xe2\x80\x98": b"'", b"\xe2\x80\x99": b"'", b"\xe2\x80\x9c": b'"', b"\xe2\x80\x9d": b'"'}
_INVISIBLE = frozenset(
    {b"\xc2\xad", b"\xe2\x80\x8b", b"\xe2\x80\x8c", b"\xe2\x80\x8d", b"\xe2\x81\xa0", b"\xef\xbb\xbf"}
)
_ENTITIES = {
    b"&lt;": b"<",
    b"&gt;": b">",
    b"&quot;": b'"',
    b"&apos;": b"'",
    b"&amp;": b"&",
    b"&nbsp;": b" ",
    b"&#39;": b"'",
    b"&#x27;": b"'",
    b"&#34;": b'"',
    b"&#x22;": b'"',
    b"&#60;": b"<",
    b"&#62;": b">",
}
_ENTITY = re.compile(b"|".join(re.escape(entity) for entity in _ENTITIES))
# A `\uXXXX` escape of a JSON string, not itself escaped (an even run of backslashes before it). Go's
# encoder (Docker's json-file driver, promtail, many shippers) writes <, > and & so, and Python's
# json.dumps every non-ASCII character; the keywords and patterns are written for the characters.
_JSON_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u([0-9a-fA-F]{4})")


def _json_character(found: re.Match[bytes]) -> bytes:
    code = int(found.group(2), 16)
    # Left escaped where the character would end or break the JSON string (control characters, the
    # quote and the backslash) or cannot stand alone (half of a surrogate pair).
    if code < 0x20 or code in (0x22, 0x5C) or 0xD800 <= code <= 0xDFFF:
        return found.group(0)
    return found.group(1) + chr(code).encode("utf-8")


# Chinese, Japanese and Korean prose runs English words and numbers into its characters without a space
# ("出现了socketFinalizeAccept: wrong type 3 != 4错误"). CJK characters are word characters to a regex, so a
# pattern's word boundary never holds there: a space goes between an ASCII letter or digit and a CJK
# character (three-byte UTF-8 sequences led by 0xE3-0xED: CJK punctuation, kana, ideographs, Hangul).
_CJK_BOUNDARY = re.compile(
    rb"(?<=[0-9A-Za-z])(?=[\xe3-\xed][\x80-\xbf][\x80-\xbf])|(?<=[\xe3-\xed][\x80-\xbf][\x80-\xbf])(?=[0-9A-Za-z])"
)
_CJK_LEAD = re.compile(rb"[\xe3-\xed]")


def _may_hold_pasted(block: bytes) -> bool:
    return b"\xc2" in block or b"\xe3" in block or b"\xef" in block or _PASTED_E2.search(block) is not None


def _plain_character(match: re.Match[bytes]) -> bytes:
    found = match.group(0)
    if found in _INVISIBLE:
        return b""
    if found in _QUOTES:
        return _QUOTES[found]
    if found[0] == 0xEF:  # a full-width form of an ASCII character (U+FF01-U+FF5E)
        return bytes(((0x20 if found[1] == 0xBC else 0x60) + found[2] - 0x80,))
    return b" "  # a no-break, fixed-width or ideographic space


def clean_block(block: bytes, cap: int, pasted: bool = False) -> bytes:
    """Whole lines in, whole lines out: over-long lines cut, NUL and ANSI escapes removed, and what a
    paste does to a log undone: tabs become spaces, HTML entities of a page's source (`&lt;`, `&quot;`,
    `&#39;`, `&amp;`...) and the `\\u003c`-style escapes of JSON records are unescaped, and where the
    block may be `pasted` (see PASTE_BYTES), outside ASCII, no-break and ideographic spaces become
    spaces, zero-width characters (and byte order marks) go, typographic quotes and full-width ASCII
    punctuation of CJK input methods (`：`, `，`, `（`) become ASCII, and a space separates ASCII words
    from CJK characters run into them. Each is a C-speed test
    first: a healthy machine-written log is ASCII, without tabs, `&` or `\\u`, and pays four C-speed scans
    of the block."""
    if len(block) > cap + 1:
        block = _cut_long_lines(block, cap)
    if b"\x00" in block:
        block = block.replace(b"\x00", b"")
    if b"\x1b" in block:
        block = _ANSI.sub(b"", block)
    if b"\t" in block:
        block = block.replace(b"\t", b" ")
    # One byte first: a one-byte `in` is a memchr, a two-byte one a slower search of the whole block.
    if b"\\" in block and b"\\u" in block:
        block = _JSON_ESCAPE.sub(_json_character, block)
    if b"&" in block:
        block = _ENTITY.sub(lambda m: _ENTITIES[m.group(0)], block)
    if pasted and not block.isascii():
        if _may_hold_pasted(block):
            block = _PASTED.sub(_plain_character, block)
        if _CJK_LEAD.search(block) is not None:
            block = _CJK_BOUNDARY.sub(b" ", block)
    return block


def _cut_long_lines(block: bytes, cap: int) -> bytes:
    """Cut every line longer than `cap` bytes; O(len) with C-level scans, no per-line Python loop.

    Each step looks at a window of cap+1 bytes from the current line start: its last newline ends a run
    of lines that are all short enough; no newline in it means the line at the start is too long.
    """
    pieces: list[bytes] = []
    start = 0
    kept_from = 0
    length = len(block)
    while length - start > cap + 1:
        last = block.rfind(b"\n", start, start + cap + 1)
        if last >= 0:
            start = last + 1
            continue
        newline = block.find(b"\n", start)
        if newline < 0:  # cannot happen for whole lines; be safe
            newline = length - 1
        line = block[start:newline]
        pieces.append(block[kept_from:start])
        pieces.append(shorten_line(line, line, b"\r" in line, cap))
        kept_from = newline
        start = newline + 1
    if not pieces:
        return block
    pieces.append(block[kept_from:])
    return b"".join(pieces)
