"""Byte streams for the reader: decompression, the decompressed-bytes budget and the ratio guard.

Every stream handed to a consumer goes through `GuardedReader`, which is the single place where
(1) decompressed bytes are charged against the whole input's budget, (2) a member's expansion ratio is
checked, and (3) any decoder/archive exception becomes an `InputError` (or, for a truncated compressed
stream, a clean end of data) so hostile bytes can never surface as a traceback.
"""

from __future__ import annotations

import bz2
import codecs
import contextlib
import gzip
import io
import logging
import lzma
import tarfile
from collections.abc import Callable
from typing import IO, BinaryIO, Protocol, TypeVar, cast

from matcher.model import InputError

log = logging.getLogger("ncclbot.read")

# Expansion only counts as a bomb once this much came out: tiny inputs compress absurdly well too.
RATIO_FLOOR_BYTES = 64 * 1024**2

_T = TypeVar("_T")


class ReadsInto(Protocol):
    """What every stream of the reader offers (`BinaryIO` does not declare it)."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


class ByteBudget:
    """Decompressed bytes delivered across one whole input (all sources of one `iter_sources` call)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def charge(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise InputError(
                f"input is larger than {self.limit} bytes once decompressed "
                "(raise NCCLBOT_MAX_INPUT_BYTES to accept it)"
            )


class _Reader(io.RawIOBase):
    """A reader whose `read(n)` returns n bytes unless the stream ends (what callers of a file expect,
    e.g. a loader doing `read(limit + 1)`), handing over what it got without extra copies when one
    underlying read suffices (the hot path)."""

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        data = self._read(size)
        if not data or len(data) >= size:
            return data
        parts = [data]
        got = len(data)
        while got < size:
            more = self._read(size - got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def readall(self) -> bytes:
        parts = []
        while data := self._read(1024 * 1024):
            parts.append(data)
        return b"".join(parts)

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _read(self, size: int) -> bytes:
        raise NotImplementedError


class CountingReader(_Reader):
    """Counts the bytes read from `inner` (the compressed side, for the ratio guard)."""

    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner
        self.count = 0

    def _read(self, size: int) -> bytes:
        data = self.inner.read(size)
        self.count += len(data)
        return data

    def close(self) -> None:
        self.inner.close()
        super().close()


class RatioGuard:
    """Bytes that came out of one archive (all its members together, sniffed heads included) against
    the archive's size on disk: declared member sizes are the archive's word, and a zip whose central
    directory lists the same data many times, or many small members, must add up."""

    def __init__(self, name: str, compressed_size: int, max_ratio: int) -> None:
        self.name = name
        self.limit = max(RATIO_FLOOR_BYTES, max_ratio * max(compressed_size, 1)) if max_ratio > 0 else 0
        self.max_ratio = max_ratio
        self.produced = 0

    def add(self, size: int) -> None:
        self.produced += size
        if self.limit and self.produced > self.limit:
            raise InputError(
                f"{self.name}: expands more than {self.max_ratio}:1 when decompressed "
                "(decompression bomb?); refusing it"
            )


class GuardedReader(_Reader):
    """The stream a consumer reads: budgeted, ratio-checked, exceptions mapped to `InputError`."""

    def __init__(
        self,
        inner: BinaryIO,
        name: str,
        budget: ByteBudget | None,
        compressed_size: Callable[[], int] | None = None,
        max_ratio: int = 0,
        closers: tuple[BinaryIO, ...] = (),
        archive: RatioGuard | None = None,
    ) -> None:
        self.inner = inner
        self.name = name
        self.budget = budget
        self.compressed_size = compressed_size
        self.max_ratio = max_ratio
        self.closers = closers
        self.archive = archive
        self.produced = 0
        self.ended = False

    def _read(self, size: int) -> bytes:
        data = self._guarded(lambda: self.inner.read(size)) or b""
        self._account(len(data))
        return data

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        """Straight into the caller's buffer: the block reader's hot path, no intermediate bytes."""
        got = self._guarded(lambda: cast(ReadsInto, self.inner).readinto(buffer)) or 0
        self._account(got)
        return got

    def _guarded(self, operation: Callable[[], _T]) -> _T | None:
        """Runs one read of `inner`; None once the data has ended (cleanly or cut short)."""
        if self.ended:
            return None
        try:
            return operation()
        except EOFError:
            # A compressed stream cut short (killed writer, partial upload): keep what was readable.
            log.warning("%s: compressed data ends early; reading what is there", self.name)
        except tarfile.ReadError as error:
            log.warning("%s: archive member ends early (%s); reading what is there", self.name, error)
        except InputError:
            raise
        except Exception as error:  # decoders raise many types on hostile bytes; most mean "corrupt"
            raise InputError(f"{self.name}: {_decoder_failure(error)}") from None
        self.ended = True
        return None

    def _account(self, size: int) -> None:
        """Charges what one read delivered; an empty read marks the end."""
        if not size:
            self.ended = True
            return
        self.produced += size
        if self.budget is not None:
            self.budget.charge(size)
        if self.archive is not None:
            self.archive.add(size)
        self._check_ratio()

    def _check_ratio(self) -> None:
        if self.compressed_size is None or self.max_ratio <= 0 or self.produced < RATIO_FLOOR_BYTES:
            return
        if self.produced > self.max_ratio * max(self.compressed_size(), 1):
            raise InputError(
                f"{self.name}: expands more than {self.max_ratio}:1 when decompressed "
                "(decompression bomb?); refusing it"
            )

    def close(self) -> None:
        for stream in (self.inner, *self.closers):
            # Closing a broken decoder must not mask the real outcome.
            with contextlib.suppress(Exception):
                stream.close()
        super().close()


class TarMemberReader(_Reader):
    """`size` bytes of a tar stream from `offset` (a member's data, read in order), ending cleanly, with
    a warning, where the archive is cut short."""

    def __init__(self, stream: IO[bytes] | None, offset: int, size: int, name: str) -> None:
        if stream is None:
            raise ValueError("tar archive has no stream")
        self.stream = stream
        self.offset = offset
        self.size = size
        self.name = name
        self.position = 0

    def _read(self, size: int) -> bytes:
        want = min(size, self.size - self.position)
        if want <= 0:
            return b""
        self.stream.seek(self.offset + self.position)  # a no-op while reading in order
        data = self.stream.read(want)
        self.position += len(data)
        if len(data) < want:
            log.warning("%s: archive member ends early; reading what is there", self.name)
            self.position = self.size
        return data

    def close(self) -> None:  # the archive owns the stream
        super().close()


class PrefixedReader(_Reader):
    """`head` (already read while sniffing a one-shot stream) followed by the rest of `inner`."""

    def __init__(self, head: bytes, inner: BinaryIO) -> None:
        self.head = head
        self.inner = inner

    def _read(self, size: int) -> bytes:
        if self.head:
            data, self.head = self.head[:size], self.head[size:]
            return data
        return self.inner.read(size)

    def close(self) -> None:
        self.inner.close()
        super().close()


class _ReadOne(io.RawIOBase):
    """Reads through `read1`, so data decoded before a truncation error is delivered, not lost.

    (`GzipFile.read(n)` gathers n bytes through a buffer and drops them all when the stream ends early.)
    Deliberately returns short reads: the `GuardedReader` above it gathers them and turns the final
    EOFError into a clean end of data.
    """

    def __init__(self, inner: gzip.GzipFile) -> None:
        self.inner = inner

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return self.inner.read1(size if size is not None and size >= 0 else -1)

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


class Utf16ToUtf8Reader(_Reader):
    """UTF-16 text (byte order mark first) re-encoded as UTF-8, incrementally."""

    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner
        self.decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")

    def _read(self, size: int) -> bytes:
        while True:
            data = self.inner.read(max(size // 2, 2))
            text = self.decoder.decode(data, final=not data)
            if text or not data:  # a lone half of a code unit decodes to nothing yet: read on
                return text.encode("utf-8", errors="replace")

    def close(self) -> None:
        self.inner.close()
        super().close()


def decompressor(kind: str, raw: BinaryIO) -> BinaryIO:
    """A decompressing reader over `raw` for one of the single-stream formats `sniff` recognises."""
    if kind == "gzip":
        return as_binary(_ReadOne(gzip.GzipFile(fileobj=raw, mode="rb")))
    if kind == "zstd":
        import zstandard  # imported on demand: most runs read plain or gzip logs

        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)
        return cast(BinaryIO, reader)
    if kind == "xz":
        return cast(BinaryIO, lzma.LZMAFile(raw))
    if kind == "bzip2":
        return cast(BinaryIO, bz2.BZ2File(raw))
    raise ValueError(f"not a compression format: {kind}")


def read_head(stream: BinaryIO, size: int) -> bytes:
    """Up to `size` bytes (fewer only at end of stream): raw reads may return short."""
    parts: list[bytes] = []
    got = 0
    while got < size:
        data = stream.read(size - got)
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


# zstd refuses frames whose window exceeds its default limit (2**27 bytes), which is what `zstd --long=28`
# and above write: the data is fine, it would just take up to 2 GiB of memory to decode.
_ZSTD_WINDOW_TOO_LARGE = "Frame requires too much memory"


def _decoder_failure(error: BaseException) -> str:
    """Why a decoder gave up, in words a user can act on."""
    if _ZSTD_WINDOW_TOO_LARGE in str(error):
        return (
            "zstd data needs a decoding window over 128 MiB (compressed with `zstd --long=28` or more), "
            "which is not read so that memory stays bounded; recompress with `zstd --long=27` "
            "or without --long"
        )
    return f"unreadable or corrupt data ({one_line(error)})"


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:200]


def as_binary(stream: io.RawIOBase | IO[bytes]) -> BinaryIO:
    return cast(BinaryIO, stream)
