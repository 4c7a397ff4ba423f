"""The `slurm` job source: a job id -> its state, nodes and the stdout/stderr files it wrote.

`scontrol show job` answers while slurmctld still holds the job (MinJobAge after it ends, 300 s by
default). After that `sacct` does: with slurmdbd, or `sacct -c` from jobcomp/filetxt when accounting
storage is disabled. sacct has StdOut/StdErr only from Slurm 24.05 (with --expand-patterns); before,
the default output name in the job's WorkDir is assumed and said so in the notes.
"""

from __future__ import annotations

import glob
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from bot.jobs import names
from bot.jobs.model import FetchedJob, JobError, JobInfo, JobNotFound, JobRef
from bot.jobs.slurm import hostlist, text
from bot.jobs.slurm.commands import SlurmCommands, first_line
from bot.jobs.slurm.patterns import PatternFields, expand

FAILED_STATES = frozenset(
    {"FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
)
SACCT_FIELDS = ["JobID", "JobIDRaw", "JobName", "User", "State", "ExitCode", "NodeList", "WorkDir"]
SACCT_STDIO_FIELDS = ["StdOut", "StdErr"]
# sacct gained StdOut/StdErr and --expand-patterns in 24.05.
STDIO_VERSION = (24, 5)
# A per-task pattern on a 10k-rank job matches 10k files; more than this is not a log set.
MAX_LOG_FILES = 20_000
NOT_LOGS = ("/dev/",)


def _version(text_: str) -> tuple[int, int]:
    match = re.search(r"(\d+)\.(\d+)", text_)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def log_files(
    patterns: list[str | None], fields: PatternFields, work_dir: str | None
) -> tuple[list[str], list[str]]:
    """The existing files the stdout/stderr patterns name, and notes on those that were not found."""
    found: list[str] = []
    notes: list[str] = []
    for pattern in dict.fromkeys(p for p in patterns if p):
        if pattern.startswith(NOT_LOGS):
            continue
        if not pattern.startswith("/") and work_dir:
            pattern = str(Path(work_dir) / pattern)
        expanded = expand(pattern, fields)
        if expanded.exact is not None and Path(expanded.exact).is_file():
            found.append(expanded.exact)
            continue
        matches = sorted(
            itertools.islice((p for p in glob.iglob(expanded.glob) if Path(p).is_file()), MAX_LOG_FILES + 1)
        )
        if len(matches) > MAX_LOG_FILES:
            raise JobError(f"{pattern!r} matches more than {MAX_LOG_FILES} files")
        if matches:
            found.extend(matches)
        else:
            notes.append(f"no file {expanded.exact or expanded.glob} on this machine (pattern {pattern})")
    return list(dict.fromkeys(found)), notes


@dataclass
class SlurmSource:
    kind = "slurm"

    commands: SlurmCommands = field(default_factory=SlurmCommands)
    # The name Slurm gives a batch job's output when --output is not given (sbatch(1)).
    default_output: str = "slurm-%j.out"
    default_array_output: str = "slurm-%A_%a.out"
    _sacct_version: tuple[int, int] | None = None

    def fetch(self, ref: JobRef, scratch: Path) -> FetchedJob:
        info = self.lookup(ref)
        if not info.log_paths:
            why = "; ".join(info.notes) or "Slurm names no stdout/stderr file"
            raise JobError(
                f"Slurm job {info.job_id} ({info.state or 'state unknown'}): no log file to read: {why}"
            )
        return FetchedJob(info=info, paths=tuple(Path(p) for p in info.log_paths))

    def lookup(self, ref: JobRef) -> JobInfo:
        job_id = names.slurm_job_id(ref.job_id)
        shown = self.commands.run("scontrol", "show", "job", job_id)
        if shown.returncode == 0:
            records = text.parse_records(shown.stdout)
            if records:
                return self._from_scontrol(job_id, records, ref.cluster)
        message = first_line(shown)
        if "invalid job id" in message.lower():
            return self.accounting(ref)
        # slurmctld down or busy: accounting (slurmdbd) may still know the job.
        try:
            return self.accounting(ref)
        except JobError as error:
            raise JobError(f"scontrol show job {job_id}: {message}; and {error}") from None

    # -- scontrol -------------------------------------------------------------------------------------

    def _from_scontrol(self, job_id: str, records: list[dict[str, str]], cluster: str | None) -> JobInfo:
        """One record, or an array's tasks (then the failed ones, or all when none failed)."""
        whole_array = len(records) > 1 and any(r.get("ArrayJobId") == job_id for r in records)
        if whole_array:
            failed = [r for r in records if text.base_state(r.get("JobState")) in FAILED_STATES]
            chosen = failed or records
        else:
            chosen = [r for r in records if job_id in (r.get("JobId"), _array_name(r))] or records[:1]
        main = chosen[0]
        paths: list[str] = []
        notes: list[str] = []
        nodes: list[str] = []
        for record in chosen:
            fields = PatternFields(
                job_id=record.get("JobId", job_id),
                job_name=record.get("JobName", ""),
                user=text.user_name(record.get("UserId")) or "",
                array_job_id=text.null(record.get("ArrayJobId")),
                array_task_id=text.null(record.get("ArrayTaskId")),
                first_node=text.null(record.get("BatchHost")),
            )
            work_dir = text.null(record.get("WorkDir"))
            found, missing = log_files(
                [text.null(record.get("StdOut")), text.null(record.get("StdErr"))], fields, work_dir
            )
            paths += found
            notes += missing
            nodes += _nodes(record)
        restarts = text.null(main.get("Restarts"))
        return JobInfo(
            job_id=job_id,
            source=self.kind,
            cluster=cluster,
            name=text.null(main.get("JobName")),
            user=text.user_name(main.get("UserId")),
            state=text.base_state(main.get("JobState")),
            reason=text.null(main.get("Reason")),
            exit_code=text.null(main.get("ExitCode")),
            nodes=tuple(dict.fromkeys(nodes)),
            batch_host=text.null(main.get("BatchHost")),
            work_dir=text.null(main.get("WorkDir")),
            attempt=int(restarts) if restarts and restarts.isdigit() else 0,
            log_paths=tuple(dict.fromkeys(paths)),
            notes=tuple(notes),
        )

    # -- sacct ----------------------------------------------------------------------------------------

    def _sacct(self, job_id: str, *, from_jobcomp: bool) -> tuple[str, list[dict[str, str]]]:
        if self._sacct_version is None:
            self._sacct_version = _version(self.commands.run("sacct", "--version").stdout)
        fields = list(SACCT_FIELDS)
        extra: list[str] = []
        if self._sacct_version >= STDIO_VERSION and not from_jobcomp:
            fields += SACCT_STDIO_FIELDS
            extra.append("--expand-patterns")
        args = [
            "--noheader",
            "--parsable2",
            "--allocations",
            f"--jobs={job_id}",
            f"--format={','.join(fields)}",
            *extra,
        ]
        if from_jobcomp:
            args.insert(0, "--completion")
        outcome = self.commands.run("sacct", *args)
        problem = first_line(outcome) if outcome.returncode else ""
        return problem, text.parse_parsable(outcome.stdout, fields)

    def accounting(self, ref: JobRef) -> JobInfo:
        """The job as sacct remembers it (what `lookup` falls back to once slurmctld forgot it)."""
        job_id, cluster = names.slurm_job_id(ref.job_id), ref.cluster
        problem, rows = self._sacct(job_id, from_jobcomp=False)
        used_jobcomp = False
        if problem and ("accounting storage is disabled" in problem.lower() or "slurmdbd" in problem.lower()):
            problem, rows = self._sacct(job_id, from_jobcomp=True)
            used_jobcomp = True
        if problem:
            raise JobError(f"sacct --jobs={job_id}: {problem}")
        # sacct has filtered by --jobs already; jobcomp records lose the array form (4_1 is JobID 4).
        wanted = [r for r in rows if job_id in (r.get("JobID"), r.get("JobIDRaw"))] or rows[:1]
        if not wanted:
            raise JobNotFound(
                f"Slurm knows no job {job_id} (neither scontrol nor sacct{' -c' if used_jobcomp else ''})"
            )
        row = wanted[0]
        array_job, _, array_task = row.get("JobID", "").partition("_")
        fields_ = PatternFields(
            job_id=row.get("JobIDRaw") or job_id,
            job_name=row.get("JobName", ""),
            user=text.null(row.get("User")) or "",
            array_job_id=array_job if array_task else None,
            array_task_id=array_task or None,
        )
        work_dir = text.null(row.get("WorkDir"))
        notes: list[str] = []
        stdio = [text.null(row.get("StdOut")), text.null(row.get("StdErr"))]
        if not any(stdio):
            stdio = [self.default_array_output if array_task else self.default_output]
            notes.append(f"this sacct does not record StdOut: assumed Slurm's default {stdio[0]} in WorkDir")
        paths, missing = log_files(stdio, fields_, work_dir)
        node_list = text.null(row.get("NodeList"))
        return JobInfo(
            job_id=job_id,
            source=self.kind,
            cluster=cluster,
            name=text.null(row.get("JobName")),
            user=text.user_name(row.get("User")),
            state=text.base_state(row.get("State")),
            exit_code=text.null(row.get("ExitCode")),
            nodes=tuple(hostlist.expand(node_list)) if node_list and node_list != "None assigned" else (),
            work_dir=work_dir,
            log_paths=tuple(paths),
            notes=tuple(notes + missing),
        )


def _array_name(record: dict[str, str]) -> str | None:
    job, task = text.null(record.get("ArrayJobId")), text.null(record.get("ArrayTaskId"))
    return f"{job}_{task}" if job and task else None


def _nodes(record: dict[str, str]) -> list[str]:
    node_list = text.null(record.get("NodeList"))
    if node_list:
        return hostlist.expand(node_list)
    batch = text.null(record.get("BatchHost"))
    return [batch] if batch else []
