"""What an accepted Slack request becomes once acknowledged: download the files, diagnose, keep the
bundle, publish; or run a probe. The listener only posts a placeholder and commits the task to the durable
work queue (bot.store.queue), so every request is acknowledged within Slack's 3 seconds whatever the size
of the logs, and nothing accepted is lost if the server dies: another worker (or this one after a
restart) takes the task over. Queue workers (bot.services.worker) run `diagnosis_concurrency` at once.

Failures: unusable input is told in Slack and the task is done; a Slack or database outage raises, and
the queue retries the task with backoff (every post carries an idempotency key, so a retry never posts
twice); a bug is told in Slack as an internal error and given up.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import SQLAlchemyError

from bot.render import slack_incident as render
from bot.render.slack_text import prose
from bot.services.bundles import SpooledFile, bundle_logs, fetched_files, keep, keep_references
from bot.services.diagnose import DiagnosisRequest, diagnose_and_record
from bot.services.hooks import JobLogs
from bot.services.outlet import Message, MessageRef, Outlet
from bot.services.publish import Placeholder, publish_diagnosis
from bot.services.worker import Handler, PermanentError, QueueWorker, is_outage
from bot.settings import Settings
from bot.slack.files import Downloader, FileProblem, SharedFile, write_pasted
from bot.store.queue import DEFAULT_LEASE, WorkQueue
from matcher.model import InputError

log = logging.getLogger("ncclbot.slack.work")

# Work item kinds of the Slack front end. Intake: what a request becomes before Slack is answered.
EVENT = "slack.event"  # an event that may bring logs (a mention, a file shared)
REQUEST = "slack.request"  # a form or shortcut with logs
# Work: what the intake queues.
DIAGNOSE = "slack.diagnose"
PROBE = "slack.probe"
JOB = "slack.job"
# Intake workers only post a placeholder and queue the work (milliseconds each).
INTAKE_THREADS = 4
# Raised so that the queue retries the task later.
TRANSIENT: tuple[type[Exception], ...] = (SlackApiError, OSError, SQLAlchemyError)


@dataclass(frozen=True, slots=True)
class DiagnoseTask:
    """One diagnosis to make. `incident_id` set: the files join that incident's bundle and the whole
    bundle is diagnosed again, editing `edit` (the incident's message)."""

    channel: str
    placeholder: MessageRef | None  # None: Slack refused the placeholder (an outage); post at the end
    placeholder_top_level: bool
    thread: MessageRef | None = None  # where the request came from (problems are told there)
    user: str | None = None
    files: tuple[SharedFile, ...] = ()
    pasted: str | None = None
    job: JobLogs | None = None
    incident_id: int | None = None
    edit: MessageRef | None = None

    def to_payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> DiagnoseTask:
        job = payload.get("job")

        def ref(name: str) -> MessageRef | None:
            value = payload.get(name)
            return None if value is None else MessageRef(**value)

        return cls(
            channel=payload["channel"],
            placeholder=ref("placeholder"),
            placeholder_top_level=bool(payload["placeholder_top_level"]),
            thread=ref("thread"),
            user=payload.get("user"),
            files=tuple(SharedFile(**f) for f in payload.get("files") or ()),
            pasted=payload.get("pasted"),
            job=None
            if job is None
            else JobLogs(**{**job, "paths": tuple(job["paths"]), "nodes": tuple(job["nodes"])}),
            incident_id=payload.get("incident_id"),
            edit=ref("edit"),
        )


class Background:
    """The Slack front end's durable background work, as a background service of `ncclbot serve`: a work
    queue in the store, intake workers (events and requests become a placeholder plus queued work) and
    the workers that do the work (`threads` at once: the diagnosis concurrency limit)."""

    name = "slack-work"

    def __init__(
        self,
        store: Any,
        handlers: Mapping[str, Handler],
        *,
        intake: Mapping[str, Handler] | None = None,
        threads: int,
        lease: timedelta = DEFAULT_LEASE,
    ) -> None:
        self.queue = WorkQueue(store)
        self.worker = QueueWorker(self.queue, handlers, threads=threads, lease=lease, outage=is_outage)
        self.intake = QueueWorker(
            self.queue, intake or {}, threads=INTAKE_THREADS, lease=lease, outage=is_outage
        )
        self.threads = threads
        self._kinds = frozenset(intake or {})

    def start(self) -> None:
        self.intake.start()
        self.worker.start()

    def stop(self) -> None:
        self.intake.stop()
        self.worker.stop()

    def submit(self, kind: str, key: str, payload: dict[str, Any], *, group: str | None = None) -> bool:
        """Commit a task (idempotent on (kind, key)); False when the same task was accepted before."""
        enqueued = self.queue.enqueue(kind, key, payload, group=group)
        (self.intake if kind in self._kinds else self.worker).wake()
        return enqueued.created

    def ahead(self, kind: str = DIAGNOSE) -> int:
        """How many tasks of `kind` a new one would wait behind (0 when a worker is free)."""
        try:
            waiting = self.queue.stats().waiting_by_kind.get(kind, 0)
        except Exception:  # a figure for the placeholder is not worth failing the request over
            return 0
        return max(0, waiting - self.threads + 1) if waiting >= self.threads else 0


class Throttle:
    """Calls `update(done, total)` at most once every `interval` seconds (Slack's per-channel limits)."""

    def __init__(self, update: Callable[[int], None], interval: float) -> None:
        self._update = update
        self._interval = interval
        self._last = time.monotonic()

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now - self._last < self._interval:
            return
        self._last = now
        try:
            self._update(done)
        except Exception as error:  # progress is a courtesy; the result matters
            log.info("progress edit failed: %s", error)


def display_names(task: DiagnoseTask, paths: list[str]) -> dict[str, str]:
    if task.job is None:
        return {p: Path(p).name for p in paths}
    if task.job.fetched_into:
        scratch = Path(task.job.fetched_into)
        return {p: Path(p).relative_to(scratch).as_posix() for p in paths if Path(p).is_relative_to(scratch)}
    return {}


@dataclass
class Diagnoser:
    """Does a DiagnoseTask: everything after the acknowledgement."""

    settings: Settings
    outlet: Outlet
    store: Any
    downloader: Downloader
    bundle_root: Path

    def run(self, task: DiagnoseTask, key: str = "") -> None:
        """Do `task`; `key` names it in the queue, so a retry after a crash spools to the same place and
        is recognised as the same input (stored once)."""
        folder = self.downloader.spool(key)
        retried = False
        try:
            self._run(task, folder)
        except (FileProblem, InputError) as problem:
            self._say(task, str(problem))
        except TRANSIENT:
            retried = True
            raise  # the queue tries again later (with the fetched job logs still there)
        except Exception as error:
            log.exception("diagnosis failed")
            self._say(task, f"Internal error while diagnosing ({type(error).__name__}); it is logged.")
            raise PermanentError(f"{type(error).__name__}: {error}") from error
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            if task.job is not None and task.job.fetched_into and not retried:
                # Done with them: what the incident keeps was copied into its bundle.
                shutil.rmtree(task.job.fetched_into, ignore_errors=True)

    def _run(self, task: DiagnoseTask, folder: Path) -> None:
        spooled, problems = self._collect(task, folder)
        refines = None
        if task.incident_id is not None:
            # More files for an incident: they join the bundle of the diagnosis its message shows, and
            # the whole bundle is diagnosed again, refining that diagnosis instead of counting another.
            bundle = bundle_logs(self.store, task.incident_id)
            keep(
                self.store,
                self.bundle_root,
                task.incident_id,
                spooled,
                cap_bytes=self.settings.bundle_keep_bytes,
                occurrence_id=bundle.occurrence_id,
            )
            refines = bundle.occurrence_id
            paths = bundle_logs(self.store, task.incident_id).paths or [str(s.path) for s in spooled]
        elif task.job is not None:
            paths = list(task.job.paths)
        else:
            paths = [str(s.path) for s in spooled]
        if not paths:
            raise FileProblem("; ".join(problems) if problems else "no log files or pasted log to read")
        total = sum(Path(p).stat().st_size for p in paths if Path(p).is_file()) or sum(
            s.size for s in spooled
        )

        def show_progress(done: int) -> None:
            if task.placeholder is not None:
                text, blocks = render.progress(done, total)
                self.outlet.update(task.placeholder, Message(text=text, blocks=tuple(blocks)))

        outcome = diagnose_and_record(
            DiagnosisRequest(
                paths=paths,
                source="slack",
                # Spool, bundle and fetch paths are the bot's business: evidence shows the file's own
                # name (a fetched pod log with its node folder); a job's own files keep their paths.
                display_names=display_names(task, paths),
                job_id=task.job.job_id if task.job else None,
                cluster=task.job.cluster if task.job else None,
                database_url=self.settings.database_url,
                progress=Throttle(show_progress, self.settings.slack_progress_interval_s),
                refines=refines,
                raise_store_outage=True,
            )
        )
        record = outcome.incident
        if record is not None and task.incident_id is None:
            # The logs of this diagnosis become its bundle: uploads are copied, a job's logs referenced.
            if spooled:
                keep(
                    self.store,
                    self.bundle_root,
                    record.id,
                    spooled,
                    cap_bytes=self.settings.bundle_keep_bytes,
                    occurrence_id=record.occurrence_id,
                )
            if task.job is not None and task.job.fetched_into:
                keep(
                    self.store,
                    self.bundle_root,
                    record.id,
                    fetched_files(
                        Path(task.job.fetched_into),
                        task.job.paths,
                        origin=f"fetched:{Path(task.job.fetched_into).name}",  # one folder per fetch
                    ),
                    cap_bytes=self.settings.bundle_keep_bytes,
                    occurrence_id=record.occurrence_id,
                )
            elif task.job is not None:
                keep_references(self.store, record.id, task.job.paths, occurrence_id=record.occurrence_id)
        job = (task.job.name or task.job.job_id) if task.job else None
        placeholder = (
            None
            if task.placeholder is None
            else Placeholder(task.placeholder, top_level=task.placeholder_top_level)
        )

        published = publish_diagnosis(
            self.outlet,
            self.store if outcome.incident is not None else None,
            task.channel,
            outcome,
            job=job,
            placeholder=placeholder,
            edit=task.edit,
        )
        if problems:
            lines = "\n".join(f"• {prose(p, 500)}" for p in problems[:10])
            self.outlet.post(
                published.message.channel, Message(text=f"Skipped:\n{lines}"), thread=published.message
            )

    def _collect(self, task: DiagnoseTask, folder: Path) -> tuple[list[SpooledFile], list[str]]:
        spooled: list[SpooledFile] = []
        problems: list[str] = []
        for shared in task.files:
            try:
                spooled.append(self.downloader.fetch(shared, folder))
            except FileProblem as problem:
                problems.append(str(problem))
        if task.pasted and task.pasted.strip():
            spooled.append(write_pasted(task.pasted, folder))
        if problems and not spooled and task.job is None and task.incident_id is None:
            raise FileProblem("; ".join(problems))
        return spooled, problems

    def _say(self, task: DiagnoseTask, text: str) -> None:
        line, blocks = render.problem(text)
        message = Message(text=line, blocks=tuple(blocks))
        try:
            if task.placeholder is not None:
                self.outlet.update(task.placeholder, message)
            else:
                self.outlet.post(task.channel, message, thread=task.thread)
        except Exception:
            log.exception("could not tell Slack about a problem")
