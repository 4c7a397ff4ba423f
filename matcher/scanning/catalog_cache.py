"""Start-up cache for expensive, deterministic loads (the validated signature catalog).

Validating the packaged catalog means parsing its TOML files and compiling every pattern: about 0.2 s,
most of a short run's start-up. The outcome depends only on its inputs (the signature files, the code
that validates them, the regex version), so it is kept as JSON under a key hashing all of them, in the
user cache folder (platformdirs; env NCCLBOT_CACHE_DIR overrides it, `off` turns the cache off).

The cache is only ever an optimisation: a missing, unreadable, damaged or foreign file means a normal
load, and a folder that cannot be written is silently left alone. It is the one place where `matcher`
writes a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import platformdirs

ENV_CACHE_DIR = "NCCLBOT_CACHE_DIR"
_DISABLED = {"", "off", "0", "no", "false"}
# Bumped when the layout of cached values changes.
_FORMAT = 1
# Entries kept per name: a few installed versions (or checkouts) side by side do not evict each other.
_KEEP = 4

log = logging.getLogger("ncclbot.cache")


def cache_directory() -> Path | None:
    """Where cached values live; None when the user turned the cache off."""
    value = os.environ.get(ENV_CACHE_DIR)
    if value is not None:
        return None if value.strip().lower() in _DISABLED else Path(value)
    return Path(platformdirs.user_cache_dir("ncclbot", appauthor=False))


def digest(parts: Iterable[bytes]) -> str:
    """A key for the inputs of a load; length-prefixed so parts cannot run into one another."""
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "little"))
        hasher.update(part)
    return hasher.hexdigest()


def cached(name: str, key: str, build: Callable[[], Any], directory: Path | None) -> Any:
    """The JSON value stored for (name, key) in `directory`, else `build()`, stored for next time.

    Errors raised by `build` propagate and nothing is stored.
    """
    if directory is None:
        return build()
    path = directory / f"{name}-{key[:40]}.json"
    found = _read(path, key)
    if found is not None:
        return found[0]
    value = build()
    _write(directory, name, path, {"format": _FORMAT, "key": key, "value": value})
    return value


def _read(path: Path, key: str) -> tuple[Any] | None:
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError):  # missing, unreadable or damaged: load normally
        return None
    if (
        not isinstance(document, dict)
        or document.get("format") != _FORMAT
        or document.get("key") != key
        or "value" not in document
    ):
        return None
    return (document["value"],)


def _write(directory: Path, name: str, path: Path, document: dict[str, Any]) -> None:
    import tempfile  # only on a cache miss: it costs a few ms of start-up

    temporary: str | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed into place: a concurrent run never reads half a file.
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}-", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(document, out, separators=(",", ":"))
        os.replace(temporary, path)
        temporary = None
        _prune(directory, name)
    except OSError as error:
        log.debug("cache %s not written (%s)", path, error)
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def _prune(directory: Path, name: str) -> None:
    """Drop all but the most recently written entries of `name`."""
    entries = []
    for entry in directory.glob(f"{name}-*.json"):
        with contextlib.suppress(OSError):
            entries.append((entry.stat().st_mtime, entry))
    for _, stale in sorted(entries, reverse=True)[_KEEP:]:
        with contextlib.suppress(OSError):
            stale.unlink()
