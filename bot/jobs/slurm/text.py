"""Parsing Slurm's text output: `scontrol show job|node` records and `sacct --parsable2` rows.

`scontrol show` prints `Key=Value` pairs separated by spaces, several to a line, records separated by
blank lines. Values may contain spaces (a job name, a path, a drain reason), so a pair ends only where
whitespace is followed by another `Key=`, and the keys that hold free text and that Slurm prints last
on their line take the rest of the line. (22.05 has no `scontrol --json`; `squeue --json` ignores -j.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Keys whose values are free text and that Slurm puts at the end of a line (multi-line output).
JOB_FREE_TEXT = frozenset(
    {"JobName", "Command", "WorkDir", "StdErr", "StdIn", "StdOut", "Comment", "AdminComment"}
)
NODE_FREE_TEXT = frozenset({"Reason", "Comment", "OS", "Extra"})

_PAIR_START = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_/:]*)=")


def _line_pairs(line: str, free_text: frozenset[str]) -> Iterable[tuple[str, str]]:
    starts = list(_PAIR_START.finditer(line))
    for index, match in enumerate(starts):
        key = match.group(1)
        if key in free_text:
            yield key, line[match.end() :].strip()
            return
        end = starts[index + 1].start() if index + 1 < len(starts) else len(line)
        yield key, line[match.end() : end].strip()


def parse_records(text: str, free_text: frozenset[str] = JOB_FREE_TEXT) -> list[dict[str, str]]:
    """Every record of `scontrol show job ID` / `scontrol show node NAME` (multi-line form)."""
    records: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for raw in text.splitlines():
        if not raw.strip():
            if current:
                records.append(current)
                current = {}
            continue
        for key, value in _line_pairs(raw.strip(), free_text):
            current.setdefault(key, value)
    if current:
        records.append(current)
    return records


def parse_parsable(text: str, fields: list[str]) -> list[dict[str, str]]:
    """`sacct --parsable2 --noheader --format=...` rows as dicts. The last field takes any extra '|'."""
    rows: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.split("|", len(fields) - 1)
        values += [""] * (len(fields) - len(values))
        rows.append(dict(zip(fields, values, strict=True)))
    return rows


def null(value: str | None) -> str | None:
    """Slurm's ways of saying "nothing": empty, (null), None, N/A, Unknown."""
    if value is None:
        return None
    stripped = value.strip()
    return None if stripped in {"", "(null)", "None", "N/A", "Unknown", "n/a"} else stripped


def user_name(value: str | None) -> str | None:
    """`UserId=alice(1001)` -> `alice`."""
    found = null(value)
    return None if found is None else found.split("(", 1)[0] or None


def base_state(value: str | None) -> str | None:
    """`CANCELLED by 1001` -> CANCELLED; `IDLE+DRAIN` stays whole (node states keep their flags)."""
    found = null(value)
    return None if found is None else found.split()[0]
