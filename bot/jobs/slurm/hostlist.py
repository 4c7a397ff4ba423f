"""Slurm host lists: `gpu-node-[017-019,021],login1` <-> the host names.

Written here rather than taken from python-hostlist because that library is GPL-licensed; the rules
are Slurm's: comma-separated items, each with any number of `[...]` groups of numbers and ranges; a
range keeps the width of its first bound (`[08-10]` -> 08 09 10).
"""

from __future__ import annotations

import itertools
import re

from bot.jobs.model import JobError

# A job on 100k nodes does not exist; a list that expands past this is an attack or a typo.
MAX_HOSTS = 100_000
_GROUP = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise JobError(f"host list {text!r}: nested brackets")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise JobError(f"host list {text!r}: ']' without '['")
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    if depth:
        raise JobError(f"host list {text!r}: '[' without ']'")
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _numbers(group: str, whole: str) -> list[str]:
    values: list[str] = []
    for part in group.split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise JobError(f"host list {whole!r}: {part!r} is not a number or a range")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise JobError(f"host list {whole!r}: range {part!r} runs backwards")
        if int(high) - int(low) >= MAX_HOSTS:
            raise JobError(f"host list {whole!r}: more than {MAX_HOSTS} hosts")
        width = len(low)
        values.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    return values


def expand(text: str) -> list[str]:
    """All host names of a Slurm host list, in order, without duplicates."""
    hosts: list[str] = []
    for item in _split_top_level(text.strip()):
        literals = _GROUP.split(item)  # literal, group, literal, group, ..., literal
        choices = [[literals[i]] if i % 2 == 0 else _numbers(literals[i], text) for i in range(len(literals))]
        count = 1
        for options in choices:
            count *= len(options)
        if len(hosts) + count > MAX_HOSTS:
            raise JobError(f"host list {text!r}: more than {MAX_HOSTS} hosts")
        hosts.extend("".join(parts) for parts in itertools.product(*choices))
    return list(dict.fromkeys(hosts))


def compress(hosts: list[str]) -> str:
    """A compact Slurm host list for `hosts` (consecutive numeric suffixes of one width folded)."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    order: list[tuple[str, int] | str] = []
    for name in dict.fromkeys(hosts):
        match = re.match(r"^(.*?)([0-9]+)$", name)
        if match is None:
            plain.append(name)
            order.append(name)
            continue
        key = (match.group(1), len(match.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(match.group(2)))
    parts: list[str] = []
    for entry in order:
        if isinstance(entry, str):
            parts.append(entry)
            continue
        prefix, width = entry
        numbers = sorted(set(groups[entry]))
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        runs: list[str] = []
        for _, run in itertools.groupby(enumerate(numbers), key=lambda pair: pair[1] - pair[0]):
            values = [n for _, n in run]
            low, high = values[0], values[-1]
            runs.append(f"{low:0{width}d}" if low == high else f"{low:0{width}d}-{high:0{width}d}")
        parts.append(f"{prefix}[{','.join(runs)}]")
    return ",".join(parts)
