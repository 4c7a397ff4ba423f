"""Line attribution: peel launcher/log prefixes off one raw line -> `Line` (rank, host, pid, time, text).

`parse_line(raw, source, lineno)` is called by the scanner only on candidate lines, so it may be thorough
rather than fast. It never raises. `parse_segments` returns every fragment of a damaged physical line.

Decoding: UTF-8 with replacement, NUL bytes and ANSI escapes removed, CRLF / trailing newline dropped.

Fragments: a physical line may hold several messages — tqdm rewrites separated by `\\r`, or a line of
another rank spliced in mid-line by unsynchronised writers (a `[rankN]:` / `[defaultN]:` tag, or an NCCL
`host:pid:tid [dev] NCCL` header, glued to the end of preceding text). Progress-bar-only fragments are
dropped and a bar glued in front of a message is removed. `parse_line` keeps the *last* remaining fragment:
the message a terminal shows, and the one that was written completely (the interrupted writer's head
comes first). `parse_segments` gives all of them, one `Line` each, with the same line number.

Prefixes are peeled from the front in any order, each form at most once (launchers stack them:
Slurm label, Ray actor tag, torchrun tee, `[rankN]:`, then the logger's own header):

| form | example | kept as |
|---|---|---|
| JSON-lines record | `{"log": "...", "time": "..."}` (docker, shippers, journal export) | time, host |
| kubectl/ISO timestamp | `2024-05-01T03:11:40.123Z ` | time |
| CRI stream tag | `stderr F ` after the timestamp (containerd / CRI-O log files) | - |
| GitLab CI stream tag | `00O `, `01E+ ` after the timestamp | - |
| `kubectl logs --prefix` | `[pod/trainer-worker-3/pytorch] ` | host (the pod) |
| Markdown quote, list item | `> `, `>> `, `> > `, `- `, `* ` (a paste in an issue or chat) | - |
| Slurm `--label` | `  3: ` | task id (rank, see below) |
| pdsh host | `node-3: `, `10.0.0.3: ` (lower-case, ending in a digit) | host |
| MPI | `[1,3]<stderr>:` | rank |
| Ray actor | `(RayWorkerWrapper pid=123) `, `(WorkerDict pid=7, ip=10.0.0.1) ` | pid, host (ip) |
| torchrun tee | `[default3]:` (any role name) | local rank |
| c10 / excepthook | `[rank12]:`, `[rank12]: ` | rank |
| c10 / glog | `[E1129 03:11:40.611181197 file.cpp:607] `, `[E ProcessGroupNCCL.cpp:458] ` | time |
| glog / torch._logging | `E0820 14:27:21.486436 4030959 file.cpp:915] ` (pid: `.py` paths) | time, pid |
| torch._logging 2.1-2.2 | `[2024-03-18 17:38:50,208] torch.distributed.x: [ERROR] ` | time |
| Python logging | `ERROR:torch.distributed.elastic.multiprocessing.api:` | - |
| NCCL 2.26+ WARN time | `[2024-05-01 03:11:40] ` | time |
| NCCL | `gpu-node-017:4120:4388 [3] ` (the `NCCL INFO/WARN` words stay in the text) | host, pid |
| UCX crash report | `[gpu-node-3:3039 :0:3095] ` | host, pid |
| syslog / journal | `Nov 29 03:11:40 gpu-node-017 kernel: `, ISO form too | time, host |
| dmesg | `[12345.678901] ` (no wall time), `[Sat Nov 29 03:11:40 2024] ` | time (-T) |

ChildFailedError `time      : 2024-05-01_03:11:40` lines keep their text and give `time`.

Ranks: `Line.rank` is the global rank, from `[rankN]:`, else the MPI tag, else a default-process-group
tag in the message (`[PG 0 Rank N]`, `[PG ID 0 PG GUID 0(default_pg) Rank N]`: PG 0 spans all ranks in
order, so its rank is global), else the Slurm label — unless a torchrun tee tag is on the line or
`Source.labels_are_ranks` is False (the file shows srun starting torchrun per node: task ids then number
nodes, not ranks) — else `Source.rank` from the path. Other
`[PG ...]` and bare `[Rank N]` tags are PG-local ranks: they stay in the text for the signatures.
Times: wall times read as UTC (see `matcher.reading.timestamps`); formats without a year use `year`, else
`Source.year` (the first dated timestamp near the start of the file), else the current year.
Host: NCCL header, else syslog host, else Ray ip, else `Source.host`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from matcher.model import Line
from matcher.reading import containers
from matcher.reading.read import Source
from matcher.reading.timestamps import epoch, epoch_without_year, month_number

RAW_CAP = 2000

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_PROGRESS_BAR = re.compile(
    r"^[^\n|]{0,200}?\d{1,3}%\|[^|\n]{0,400}\|\s*[^\s\[]{0,40}\s*\[[^\]\n]{0,300}\]\s*"
)
_BAR_OWNER = re.compile(r"^\s*\[(?:rank|default)\d{1,6}\]: ?")
_SPLICE = re.compile(
    r"(?<![\]:\s])(?=\[(?:rank|default)\d{1,6}\]:)"
    r"|(?<=[^\w\s:\].-])(?=[A-Za-z][\w.-]{0,62}:\d{1,9}:\d{1,9} \[\d{1,3}\] NCCL )"
)
_NCCL_HEAD = re.compile(r"[A-Za-z][\w.-]{0,62}:\d{1,9}:\d{1,9} \[\d{1,3}\] NCCL ")
_DEFAULT_PG_RANK = re.compile(r"\[PG (?:ID )?0(?: PG GUID [^\]\s]{1,80})? Rank (\d{1,6})\]")
_CHILD_FAILED_TIME = re.compile(r"^\s*time\s*:\s*(\d{4})-(\d\d)-(\d\d)_(\d\d):(\d\d):(\d\d)")
_MONTH = r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_ISO = r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?"
_ISO_T = r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?"
_ZONE = r"(?:Z|[+-]\d\d:?\d\d)?"


@dataclass
class _Found:
    """What the peeled prefixes said about a line."""

    rank: int | None = None
    mpi_rank: int | None = None
    task: int | None = None
    local_rank: int | None = None
    host: str | None = None
    syslog_host: str | None = None
    ray_host: str | None = None
    pid: int | None = None
    time: float | None = None

    def set_time(self, value: float | None) -> None:
        if self.time is None:
            self.time = value


Handler = Callable[["re.Match[str]", _Found, int | None], None]


def _on_iso(m: re.Match[str], found: _Found, year: int | None) -> None:
    found.set_time(_iso_epoch(m, 1))


def _on_pod(m: re.Match[str], found: _Found, year: int | None) -> None:
    found.syslog_host = found.syslog_host or m.group(1)


def _on_slurm(m: re.Match[str], found: _Found, year: int | None) -> None:
    found.task = int(m.group(1))


def _on_mpi(m: re.Match[str], found: _Found, year: int | None) -> None:
    found.mpi_rank = int(m.group(1))


def _on_ray(m: re.Match[str], found: _Found, year: int | None) -> None:
    found.pid = found.pid if found.pid is not None else int(m.group(1))
    found.ray_host = m.group(2)


def _on_tee(m: re.Match[str], found: _Found, year: int | None) -> None:
    found.local_rank = int(m.group(1))


def _on_rank(m: re.Match[str], found: _Found, year: int | None) -> None:
    found.rank = int(m.group(1))


def _on_c10(m: re.Match[str], found: _Found, year: int | None) -> None:
    month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 6))
    found.set_time(epoch_without_year(month, day, hour, minute, second, m.group(6), year))


def _on_glog(m: re.Match[str], found: _Found, year: int | None) -> None:
    _on_c10(m, found, year)
    if m.group(8).endswith(".py") and found.pid is None:  # torch._logging prints the pid; glog the tid
        found.pid = int(m.group(7))


def _on_bracket_iso(m: re.Match[str], found: _Found, year: int | None) -> None:
    found.set_time(_iso_epoch(m, 1))


def _on_nccl(m: re.Match[str], found: _Found, year: int | None) -> None:
    found.host = m.group(1)
    if found.pid is None:
        found.pid = int(m.group(2))


def _on_syslog(m: re.Match[str], found: _Found, year: int | None) -> None:
    month = month_number(m.group(1)) or 0
    day, hour, minute, second = (int(m.group(i)) for i in range(2, 6))
    found.set_time(epoch_without_year(month, day, hour, minute, second, m.group(6) or "", year))
    found.syslog_host = m.group(7)


# Loggers that write `<ISO time> <LEVEL> <logger>: message` (vLLM, many Python services) look like RFC 5424
# syslog with the level where the host goes: a level word is never a host.
_LEVEL_WORDS = frozenset(
    {"TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "CRITICAL", "FATAL"}
)


def _on_syslog_iso(m: re.Match[str], found: _Found, year: int | None) -> None:
    found.set_time(_iso_epoch(m, 1))
    if m.group(8).upper() not in _LEVEL_WORDS:
        found.syslog_host = m.group(8)


def _on_dmesg_wall(m: re.Match[str], found: _Found, year: int | None) -> None:
    month = month_number(m.group(1)) or 0
    day, hour, minute, second, full_year = (int(m.group(i)) for i in range(2, 7))
    found.set_time(epoch(full_year, month, day, hour, minute, second))


def _ignore(m: re.Match[str], found: _Found, year: int | None) -> None:
    return None


# Order matters only where two forms could match the same start; each form is peeled at most once.
_STAGES: tuple[tuple[re.Pattern[str], Handler], ...] = (
    # A paste quoted in Markdown (`> `, `>> `, `> > `) or listed (`- `, `* `), in any order.
    (re.compile(r"^ {0,3}(?:> ?)+(?:[-*+] )?"), _ignore),
    (re.compile(r"^ {0,3}[-*+] "), _ignore),
    (
        re.compile(rf"^{_ISO_T}{_ZONE} ([\w.-]{{1,200}}) [\w./@-]{{1,100}}(?:\[\d{{1,10}}\])?: "),
        _on_syslog_iso,
    ),
    (re.compile(rf"^{_ISO}{_ZONE}:?\s+(?:-\s+)?"), _on_iso),
    (re.compile(r"^(?:stdout|stderr) [PF] "), _ignore),
    (re.compile(r"^[0-9a-f]{2}[OE]\+? "), _ignore),  # GitLab CI's stream tag after its timestamp
    (re.compile(r"^\[pod/([\w.-]{1,253})/[\w.-]{1,63}\] "), _on_pod),
    (re.compile(r"^ {0,8}(\d{1,6}): "), _on_slurm),
    # pdsh / DeepSpeed's multi-node runner: `node-3: `, `10.0.0.3: ` (a lower-case host ending in a digit,
    # so that `RuntimeError: `, `libnccl.so.2: ` or `python3: ` are not taken for one).
    (re.compile(r"^(?!python\d|pip\d)([a-z][a-z0-9-]{0,62}\d|\d{1,3}(?:\.\d{1,3}){3}): "), _on_pod),
    (re.compile(r"^\[\d{1,6},(\d{1,6})\]<(?:stdout|stderr|stddiag)>: ?"), _on_mpi),
    (re.compile(r"^\((?:[A-Za-z_][\w.:-]{0,80} )?pid=(\d{1,10})(?:, ip=([0-9A-Fa-f.:]{3,45}))?\) "), _on_ray),
    (re.compile(r"^\[(?!rank\d)[A-Za-z_][\w-]{0,40}?(\d{1,6})\]:"), _on_tee),
    (re.compile(r"^\[rank(\d{1,6})\]: ?"), _on_rank),
    (re.compile(r"^\[[IWEF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,9}) [^\]\s]{1,200}\] ?"), _on_c10),
    (re.compile(r"^\[[IWEF] [^\]\s:]{1,200}:\d{1,7}\] ?"), _ignore),
    (
        re.compile(
            r"^[IWECFV](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,9}) +(\d{1,10}) "
            r"([^\]\s]{1,300}):\d{1,7}\] ?"
        ),
        _on_glog,
    ),
    (
        re.compile(rf"^\[{_ISO}\] ?(?:[\w.]{{1,200}}: \[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] )?"),
        _on_bracket_iso,
    ),
    (re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.<>-]{1,200}:"), _ignore),
    (re.compile(r"^([A-Za-z0-9][\w.%-]{0,62}):(\d{1,10}):\d{1,10} \[\d{1,3}\] "), _on_nccl),
    # UCX / HPC-X crash reports: `[host:pid :thread:tid] Caught signal 7 (Bus error ...)`.
    (re.compile(r"^\[([A-Za-z0-9][\w.-]{0,62}):(\d{1,10}) ?:\d{1,10}:\d{1,10}\] "), _on_nccl),
    (
        re.compile(
            rf"^{_MONTH} {{1,2}}(\d{{1,2}}) (\d\d):(\d\d):(\d\d)(?:\.(\d{{1,9}}))? "
            r"([\w.-]{1,200}) [\w./@-]{1,100}(?:\[\d{1,10}\])?: "
        ),
        _on_syslog,
    ),
    (re.compile(r"^\[ {0,12}\+?\d{1,12}\.\d{1,9}\] "), _ignore),
    (
        re.compile(
            rf"^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) {_MONTH} {{1,2}}(\d{{1,2}}) "
            r"(\d\d):(\d\d):(\d\d) (\d{4})\] "
        ),
        _on_dmesg_wall,
    ),
)


def parse_line(raw: bytes, source: Source, lineno: int, *, year: int | None = None) -> Line:
    """The message of one physical line (its last meaningful fragment), attributed. Never raises."""
    try:
        text, record = _unwrapped(_decode(raw))
        fragments = _fragments(text)
        return _attribute(fragments[-1] if fragments else "", source, lineno, _year(year, source), record)
    except Exception:  # hostile bytes must cost a line's attribution, never the diagnosis
        text = raw.decode("utf-8", errors="replace")
        return Line(source.name, lineno, text=text, raw=text[:RAW_CAP], rank=source.rank, host=source.host)


def parse_segments(raw: bytes, source: Source, lineno: int, *, year: int | None = None) -> tuple[Line, ...]:
    """Every meaningful fragment of a physical line (see the module note), in order. Never raises."""
    plain = _plain_nccl_line(raw, source, lineno)
    if plain is not None:
        return (plain,)
    try:
        text, record = _unwrapped(_decode(raw))
        fragments = _fragments(text) or [""]
        return tuple(
            _attribute(fragment, source, lineno, _year(year, source), record) for fragment in fragments
        )
    except Exception:
        return (parse_line(raw, source, lineno, year=year),)


_NCCL_LINE = re.compile(r"([A-Za-z][\w.-]{0,62}):(\d{1,10}):\d{1,10} \[\d{1,3}\] (?=NCCL )")
_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"})
# What makes a line more than an NCCL header and its message: `\r` rewrites, NUL, escapes, progress
# bars, rank tags (one search instead of one per mark: this runs on every NCCL candidate line). Written
# as one character class with the rest checked behind it, which `re` scans for at C speed; an alternation
# of the marks is tried branch by branch at every byte (three times slower on a 150-byte line).
_NOT_PLAIN = re.compile(rb"[\r\n\x00\x1b%\[](?:(?<=[\r\n\x00\x1b])|(?<=%)\||(?<=\[)(?:rank|default))")


def _plain_nccl_line(raw: bytes, source: Source, lineno: int) -> Line | None:
    """The common case in one step: a line that is nothing but an NCCL header and its message (no
    launcher prefix, splice, progress bar, `\r` rewrite or escape), which `_peel` would take apart into
    the same `Line` at several times the cost (NCCL_DEBUG=INFO logs are mostly such lines). None when the
    line is anything else (a host holding `%`, which the NCCL prefix allows but the splice test treats as
    the end of other text, included)."""
    if _NOT_PLAIN.search(raw) is not None:
        return None
    text = raw.decode("utf-8", errors="replace")
    header = _NCCL_LINE.match(text)
    if header is None:
        return None
    host = header.group(1)
    at = header.end()
    # A host named like a log level would be peeled as a Python logging prefix first.
    if host in _LEVELS or text.find("] NCCL ", at) >= 0:
        return None
    message = text[at:]
    # What `_global_rank` says of a line that carries no launcher prefix.
    rank = source.rank
    if "[PG " in message:
        default_pg = _DEFAULT_PG_RANK.search(message)
        if default_pg:
            rank = int(default_pg.group(1))
    return Line(
        source.name,
        lineno,
        message,
        text if len(text) <= RAW_CAP else text[:RAW_CAP],
        rank,
        None,
        host,
        int(header.group(2)),
    )


def written_pieces(raw: bytes) -> tuple[str, ...]:
    """A physical line as written, decoded (the message of a container record), cut at its `\r`
    rewrites, progress bars kept: what the scanner falls back on when no fragment matched."""
    try:
        text, _ = _unwrapped(_decode(raw))
    except Exception:  # pragma: no cover - hostile bytes cost the fallback, never the scan
        return ()
    pieces = re.split(r"[\r\n]", text) if "\r" in text or "\n" in text else [text]
    return tuple(piece for piece in pieces if piece.strip())


def _year(year: int | None, source: Source) -> int | None:
    return year if year is not None else source.year


def _decode(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    if "\x00" in text:
        text = text.replace("\x00", "")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return text.rstrip("\n").rstrip("\r")


def _unwrapped(text: str) -> tuple[str, containers.Record | None]:
    """The message of a JSON-lines container record (and the record), or the line as it is."""
    record = containers.unwrap(text) if text[:1] == "{" else None
    return (record.text, record) if record is not None else (text, None)


def _fragments(text: str) -> list[str]:
    # A caller handing over several lines gets them treated like `\r` rewrites: one fragment each.
    pieces = re.split(r"[\r\n]", text) if "\r" in text or "\n" in text else [text]
    fragments: list[str] = []
    for piece in pieces:
        for fragment in _SPLICE.split(piece) if _may_splice(piece) else (piece,):
            if "%|" in fragment:
                # The bar goes, the rank tag it was printed under stays: it says whose work the bar shows.
                owner = _BAR_OWNER.match(fragment)
                head = owner.group(0) if owner else ""
                fragment = head + _PROGRESS_BAR.sub("", fragment[len(head) :], count=1)
            if fragment.strip():
                fragments.append(fragment)
    return fragments


def _may_splice(piece: str) -> bool:
    """Whether `_SPLICE` can split the piece at all (its lookarounds cost a few µs per line). An NCCL
    header splices only where it follows other text, never where it starts the piece, and a position
    inside a header's own host name fails the splice's lookbehind; so one header at the start is no
    splice."""
    if len(piece) <= 8:
        return False
    if "[rank" in piece or "[default" in piece:
        return True
    first = piece.find("] NCCL ")
    if first < 0:
        return False
    return piece.find("] NCCL ", first + 1) >= 0 or _NCCL_HEAD.match(piece) is None


def _attribute(
    fragment: str, source: Source, lineno: int, year: int | None, record: containers.Record | None = None
) -> Line:
    found = _Found()
    text = _peel(fragment, found, year)
    if record is not None:  # the container runtime's own time and host, under what the message says
        found.set_time(record.time)
        found.syslog_host = found.syslog_host or record.host
    child_time = _CHILD_FAILED_TIME.match(text)
    if child_time:
        found.set_time(_iso_epoch(child_time, 1))
    return Line(
        source=source.name,
        lineno=lineno,
        text=text,
        raw=fragment[:RAW_CAP],
        rank=_global_rank(found, text, source),
        local_rank=found.local_rank,
        host=found.host or found.syslog_host or found.ray_host or source.host,
        pid=found.pid,
        time=found.time,
    )


# All stages in one alternation, each in a named group: one match call finds the first stage (in order)
# that fits the start of the text, instead of one Python call per stage and peel (~30 per line).
_ANY_STAGE = re.compile("|".join(f"(?P<s{i}>{pattern.pattern})" for i, (pattern, _) in enumerate(_STAGES)))


def _peel(text: str, found: _Found, year: int | None) -> str:
    used = [False] * len(_STAGES)
    while text:
        index = _first_stage(text, used)
        if index is None:
            break
        pattern, handler = _STAGES[index]
        match = pattern.match(text)
        if match is None:  # pragma: no cover - the alternation said it fits
            break
        handler(match, found, year)
        text = text[match.end() :]
        used[index] = True
    return text


def _first_stage(text: str, used: list[bool]) -> int | None:
    """The first stage, in order, not used yet, whose pattern matches a non-empty start of text."""
    hit = _ANY_STAGE.match(text)
    if hit is None:
        return None
    index = int((hit.lastgroup or "s0")[1:])
    if not used[index] and hit.end() > 0:
        return index
    for later, (pattern, _) in enumerate(_STAGES):  # that one was used (or matched empty): look on
        if not used[later]:
            match = pattern.match(text)
            if match and match.end() > 0:
                return later
    return None


def _global_rank(found: _Found, text: str, source: Source) -> int | None:
    if found.rank is not None:
        return found.rank
    if found.mpi_rank is not None:
        return found.mpi_rank
    if "[PG " in text:
        default_pg = _DEFAULT_PG_RANK.search(text)
        if default_pg:
            return int(default_pg.group(1))
    if found.task is not None and found.local_rank is None and source.labels_are_ranks:
        return found.task
    return source.rank


def _iso_epoch(m: re.Match[str], first: int) -> float | None:
    year, month, day, hour, minute, second = (int(m.group(first + i)) for i in range(6))
    fraction = m.group(first + 6) if m.re.groups >= first + 6 else None
    return epoch(year, month, day, hour, minute, second, fraction or "")
