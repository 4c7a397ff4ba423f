"""Slurm's file-name patterns (`--output=%x-%j.out`): the names a job's stdout and stderr really got.

`scontrol show job` expands some symbols and leaves others (`%N` stays `%N`); the epilog's
`SLURM_JOB_STDOUT` and 22.05's `sacct` give the raw pattern. Symbols whose value is known are replaced
exactly; those that depend on where a task ran (`%N` node name, `%n` node index, `%t` task rank, `%s`
step) become `*`, so one pattern finds every per-node or per-task file. A backslash anywhere turns
expansion off, as it does in Slurm (sbatch(1), "filename pattern").
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass

# Slurm's value of %a for a job that is not part of an array (NO_VAL).
NO_ARRAY_TASK = "4294967294"
_SYMBOL = re.compile(r"%(\d*)([%AaJjNnstuxb])")
_PER_PLACE = frozenset("Nnts")  # differ per node, task or step: matched with '*'


@dataclass(frozen=True, slots=True)
class PatternFields:
    job_id: str
    job_name: str = ""
    user: str = ""
    array_job_id: str | None = None
    array_task_id: str | None = None
    first_node: str | None = None


@dataclass(frozen=True, slots=True)
class Expanded:
    """`exact`: the name with every known symbol replaced (None when a per-place symbol is in it);
    `glob`: a glob pattern that also matches the per-node / per-task files."""

    exact: str | None
    glob: str


def _value(symbol: str, fields: PatternFields) -> str | None:
    array_job = fields.array_job_id or fields.job_id
    task = fields.array_task_id
    values = {
        "%": "%",
        "j": fields.job_id,
        "J": None,  # jobid.stepid
        "A": array_job,
        "a": task if task is not None else NO_ARRAY_TASK,
        "b": str(int(task) % 10) if task is not None and task.isdigit() else "0",
        "u": fields.user,
        "x": fields.job_name,
    }
    return values.get(symbol)


def expand(pattern: str, fields: PatternFields) -> Expanded:
    if "\\" in pattern:
        literal = pattern.replace("\\", "")
        return Expanded(exact=literal, glob=glob.escape(literal))
    exact_parts: list[str] = []
    glob_parts: list[str] = []
    exact_possible = True
    position = 0
    for match in _SYMBOL.finditer(pattern):
        literal = pattern[position : match.start()]
        exact_parts.append(literal)
        glob_parts.append(glob.escape(literal))
        width, symbol = match.group(1), match.group(2)
        value = _value(symbol, fields)
        if symbol == "N" and fields.first_node:
            # The batch step's stdout is named after the node that ran it; per-step files differ.
            exact_parts.append(fields.first_node)
            glob_parts.append("*")
        elif symbol in _PER_PLACE or value is None:
            exact_possible = False
            glob_parts.append("*")
        else:
            padded = value.zfill(int(width)) if width and value.isdigit() else value
            exact_parts.append(padded)
            glob_parts.append(glob.escape(padded))
        position = match.end()
    tail = pattern[position:]
    exact_parts.append(tail)
    glob_parts.append(glob.escape(tail))
    return Expanded(exact="".join(exact_parts) if exact_possible else None, glob="".join(glob_parts))


def has_symbols(pattern: str) -> bool:
    return "\\" not in pattern and _SYMBOL.search(pattern) is not None
