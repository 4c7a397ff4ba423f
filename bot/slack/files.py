"""Downloading a file someone shared with the bot: `files.info`, then `url_private_download` with the
bot token, streamed to a spool file under the size cap.

The token only ever goes to a Slack file host (or to the configured API host, which is how tests point
the bot at a local fake), and redirects are never followed with it. Every way this can fail is a
`FileProblem` whose text is one line for the person who shared the file: a file over the cap, Slack's
HTML login page instead of the file, a file type that is no log.
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.render.slack_incident import human_bytes
from bot.services.bundles import SpooledFile, safe_name
from bot.services.scratch import empty_folder

CHUNK = 1 << 20
DOWNLOAD_TIMEOUT_S = 120
# Hosts Slack serves private files from.
SLACK_FILE_HOSTS = ("slack.com", "slack-files.com", "slack-edge.com")
# Shared files that cannot be logs (Slack's `filetype` values and MIME families).
NOT_LOGS = frozenset(
    {
        "png",
        "jpg",
        "jpeg",
        "gif",
        "bmp",
        "webp",
        "heic",
        "pdf",
        "mp4",
        "mov",
        "webm",
        "mp3",
        "m4a",
        "wav",
        "docx",
        "xlsx",
        "pptx",
        "doc",
        "xls",
        "ppt",
        "key",
        "numbers",
        "pages",
        "gdoc",
        "gsheet",
        "gpres",
        "canvas",
        "quip",
        "email",
    }
)
NOT_LOG_MIME = ("image/", "video/", "audio/")


class FileProblem(Exception):
    """A shared file that cannot be read; `str()` is one line for a person."""


class SlackUnavailable(OSError):
    """Slack's file host failed or could not be reached: not the file's fault, so the task is retried
    (an OSError, one of the outages bot.slack.work retries)."""


@dataclass(frozen=True, slots=True)
class SharedFile:
    """What an event or shortcut says about a file before it is fetched."""

    id: str
    name: str
    size: int

    @classmethod
    def from_payload(cls, item: dict[str, Any]) -> SharedFile:
        """From an event's or shortcut's file object; a size it does not state as a number is 0 (the
        size that counts is what files.info says and what the download brings)."""
        size = item.get("size")
        return cls(
            id=str(item.get("id", "")),
            name=str(item.get("name") or item.get("title") or "log"),
            size=size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0,
        )


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect ends the download: the bearer token must not travel to wherever it points."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        raise urllib.error.HTTPError(
            req.full_url, code, f"redirected to {urlsplit(newurl).hostname}", headers, fp
        )


def token_may_go_to(url: str, api_url: str) -> bool:
    """True for https Slack file hosts, and for the configured API host itself (scheme and host equal)."""
    parts, api = urlsplit(url), urlsplit(api_url)
    host = (parts.hostname or "").lower()
    if (parts.scheme, host, parts.port) == (api.scheme, (api.hostname or "").lower(), api.port):
        return True
    return parts.scheme == "https" and any(host == h or host.endswith("." + h) for h in SLACK_FILE_HOSTS)


class Downloader:
    """Fetches shared files into `spool_dir` (a temporary directory when None), each at most `cap` bytes."""

    def __init__(
        self, client: WebClient, *, token: str, api_url: str, cap: int, spool_dir: Path | None
    ) -> None:
        self.client = client
        self._token = token
        self.api_url = api_url
        self.cap = cap
        self.spool_dir = spool_dir
        self._opener = urllib.request.build_opener(_NoRedirects(), urllib.request.ProxyHandler({}))

    def spool(self, key: str = "") -> Path:
        """An empty folder for one request's files. With `key` (the queued task's), always the same
        folder for the same task: a retry after a crash reads its files under the same names, so the
        diagnosis is recognised as the same input and stored once."""
        return empty_folder(self.spool_dir, "slack", key)

    def fetch(self, shared: SharedFile, folder: Path) -> SpooledFile:
        info = self._info(shared)
        name = str(info.get("name") or shared.name)
        size = int(info.get("size") or shared.size or 0)
        shown = safe_name(name)
        filetype = str(info.get("filetype") or "").lower()
        mimetype = str(info.get("mimetype") or "").lower()
        if filetype in NOT_LOGS or mimetype.startswith(NOT_LOG_MIME):
            raise FileProblem(
                f"{shown} is a {filetype or mimetype} file, not a log: share the text log or an archive"
            )
        if size > self.cap:
            raise FileProblem(
                f"{shown} is {human_bytes(size)}, over this bot's cap of {human_bytes(self.cap)}"
            )
        url = str(info.get("url_private_download") or info.get("url_private") or "")
        if not url:
            raise FileProblem(f"Slack gave no download link for {shown}")
        if not token_may_go_to(url, self.api_url):
            raise FileProblem(f"{shown} is hosted on {urlsplit(url).hostname}, not on Slack: not downloaded")
        target = folder / hashlib.sha256(shared.id.encode()).hexdigest()[:12] / shown
        target.parent.mkdir(parents=True, exist_ok=True)
        written = self._download(url, target, shown)
        return SpooledFile(name=shown, path=target, size=written, origin=f"slack:{shared.id}")

    def _info(self, shared: SharedFile) -> dict[str, Any]:
        """files.info always: Slack Connect files arrive as stubs, and events may be stale."""
        try:
            response = self.client.files_info(file=shared.id)
        except SlackApiError as error:
            if error.response.status_code == 429 or error.response.status_code >= 500:
                raise  # Slack is down or busy: the task is tried again later, the file is not refused
            reason = error.response.get("error", "error")
            raise FileProblem(f"cannot read {safe_name(shared.name)} from Slack ({reason})") from None
        return dict(response.get("file") or {})

    def _download(self, url: str, target: Path, shown: str) -> int:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self._token}"})
        try:
            with self._opener.open(request, timeout=DOWNLOAD_TIMEOUT_S) as response:
                content_type = str(response.headers.get("Content-Type", "")).lower()
                if content_type.startswith("text/html"):
                    raise FileProblem(_login_page(shown))
                written = 0
                with target.open("wb") as out:
                    while chunk := response.read(CHUNK):
                        if written == 0 and chunk.lstrip()[:15].lower().startswith(
                            (b"<!doctype html", b"<html")
                        ):
                            raise FileProblem(_login_page(shown))
                        written += len(chunk)
                        if written > self.cap:
                            raise FileProblem(f"{shown} is over this bot's cap of {human_bytes(self.cap)}")
                        out.write(chunk)
                return written
        except FileProblem:
            target.unlink(missing_ok=True)
            raise
        except urllib.error.HTTPError as error:
            target.unlink(missing_ok=True)
            if error.code == 429 or error.code >= 500:
                raise SlackUnavailable(f"downloading {shown}: Slack answered {error.code}") from None
            raise FileProblem(f"downloading {shown} failed: {error.reason}") from None
        except (urllib.error.URLError, OSError, TimeoutError) as error:
            # The file host cannot be reached (Slack down, the network): tried again later.
            target.unlink(missing_ok=True)
            reason = getattr(error, "reason", None) or error
            raise SlackUnavailable(f"downloading {shown} failed: {reason}") from None


def _login_page(shown: str) -> str:
    return (
        f"Slack sent its sign-in page instead of {shown}: the bot may lack the files:read scope or "
        "access to this file"
    )


def write_pasted(text: str, folder: Path, name: str = "pasted.log") -> SpooledFile:
    """A pasted log as a spool file (its origin is its content hash, so the same paste joins once)."""
    data = text.encode("utf-8", errors="replace")
    target = folder / "pasted" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return SpooledFile(
        name=name, path=target, size=len(data), origin="pasted:" + hashlib.sha256(data).hexdigest()[:24]
    )
