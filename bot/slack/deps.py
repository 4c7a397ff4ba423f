"""What every listener shares: settings, the Web API client, the outlet, the store, the durable
background work, the incident actions, the admin policy and the job sources; `accept`, the one way a
request with files is committed before it is acknowledged, and `start_diagnosis`, the one way it becomes
a placeholder plus a queued diagnosis; and the handlers of the queued tasks.

Every post a task makes goes through post_once under a key derived from its queue key, so a task taken
over after a crash, or retried after an outage, never posts twice."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.render import slack_blocks as kit
from bot.render import slack_incident as render
from bot.services.hooks import JobNotFound, JobSources
from bot.services.incidents import ActionError, IncidentActions
from bot.services.outlet import Message, MessageRef, Outlet
from bot.services.posting import post_once
from bot.services.worker import Handler, PermanentError, is_outage
from bot.settings import Settings
from bot.slack.files import SharedFile
from bot.slack.middleware import AdminPolicy
from bot.slack.work import (
    DIAGNOSE,
    EVENT,
    JOB,
    PROBE,
    REQUEST,
    Background,
    Diagnoser,
    DiagnoseTask,
)

log = logging.getLogger("ncclbot.slack")


@dataclass
class SlackDeps:
    settings: Settings
    client: WebClient
    outlet: Outlet
    store: Any
    diagnoser: Diagnoser
    actions: IncidentActions
    policy: AdminPolicy
    jobs: JobSources | None
    background: Background = field(init=False)

    def __post_init__(self) -> None:
        self.background = Background(
            self.store,
            self.handlers(),
            intake=self.intake_handlers(),
            threads=self.settings.diagnosis_concurrency,
            lease=timedelta(seconds=self.settings.work_lease_s),
        )

    def handlers(self) -> dict[str, Handler]:
        return {
            DIAGNOSE: lambda item: self.diagnoser.run(DiagnoseTask.from_payload(item.payload), item.key),
            PROBE: lambda item: self._probe_task(item.key, item.payload),
            JOB: lambda item: self._job_task(item.key, item.payload),
        }

    def intake_handlers(self) -> dict[str, Handler]:
        from bot.slack.listeners.events import take_message

        return {
            EVENT: lambda item: take_message(self, item.payload["event"]),
            REQUEST: lambda item: self._request_task(item.key, item.payload),
        }

    def _request_task(self, key: str, payload: dict[str, Any]) -> None:
        self.start_diagnosis(DiagnoseTask.from_payload(payload), key=key)

    def accept(
        self,
        key: str,
        channel: str,
        *,
        thread: MessageRef | None,
        user: str | None,
        files: Sequence[SharedFile] = (),
        pasted: str | None = None,
        incident_id: int | None = None,
        edit: MessageRef | None = None,
    ) -> None:
        """Commit a request that brings logs (a form, a shortcut) under `key`, the request's own id;
        call it before acknowledging, so that an acknowledged request is never lost. An intake worker
        then posts its placeholder and queues its diagnosis (`start_diagnosis`)."""
        task = DiagnoseTask(
            channel=channel,
            placeholder=None,
            placeholder_top_level=thread is None,
            thread=thread,
            user=user,
            files=tuple(files),
            pasted=pasted,
            incident_id=incident_id,
            edit=edit,
        )
        self.background.submit(REQUEST, key, task.to_payload())

    def start_diagnosis(self, task: DiagnoseTask, *, key: str) -> MessageRef | None:
        """Post the task's placeholder ("Reading 30 MB from 2 files…", in its thread when it has one)
        unless it has one, and queue the diagnosis under `key`. Both happen once however often this runs
        for the same key (a retry after a crash): the placeholder is posted through post_once and the
        queue is idempotent. Returns the placeholder (None when Slack refused it: an outage)."""
        placeholder = task.placeholder
        if placeholder is None:
            count = len(task.files) + (1 if task.pasted else 0)
            size = sum(f.size for f in task.files) + len((task.pasted or "").encode())
            text, blocks = render.placeholder(files=count, total_bytes=size, queued=self.background.ahead())
            message = Message(text=text, blocks=tuple(blocks))
            try:
                placeholder = post_once(
                    self.outlet, self.store, f"placeholder:{key}", task.channel, message, thread=task.thread
                )
            except SlackApiError as error:
                if is_outage(error):
                    raise  # Slack is down: tried again (the asker's thread gets its placeholder then)
                # Refused (the bot is not in the channel...): the diagnosis still runs and says so.
                log.warning("placeholder not posted (%s); the result will be posted when it can", error)
        group = f"incident:{task.incident_id}" if task.incident_id is not None else None
        self.background.submit(
            DIAGNOSE, key, replace(task, placeholder=placeholder).to_payload(), group=group
        )
        return placeholder

    def queue_probe(
        self, key: str, node: str, user: str, *, incident_id: int | None, channel: str | None
    ) -> None:
        payload = {"node": node, "user": user, "incident": incident_id, "channel": channel}
        self.background.submit(PROBE, key, payload)

    def queue_job(self, key: str, job_id: str, cluster: str | None, *, channel: str, user: str) -> None:
        """Commit `/nccl diagnose <job-id>` (before it is acknowledged); its worker posts the placeholder."""
        payload = {"job_id": job_id, "cluster": cluster, "channel": channel, "user": user}
        self.background.submit(JOB, key, payload)

    def _probe_task(self, key: str, payload: dict[str, Any]) -> None:
        incident = payload.get("incident")
        if incident is not None:
            where = self.actions.message_of(incident)
            if where is not None:
                text = f":stethoscope: Running the probe on {render.inline_code(payload['node'], 120)}…"
                post_once(
                    self.outlet, self.store, f"{key}:started", where.channel, Message(text=text), thread=where
                )
        try:
            self.actions.probe(
                incident,
                payload["node"],
                payload["user"],
                self.probe,
                channel=payload.get("channel"),
                key=key,
            )
        except ActionError as error:
            raise PermanentError(str(error)) from error

    def _job_task(self, key: str, payload: dict[str, Any]) -> None:
        """Fetch a job's logs through the job sources, then diagnose them like any upload."""
        job_id, channel = str(payload["job_id"]), str(payload["channel"])
        text = f":hourglass_flowing_sand: Fetching the logs of job {render.inline_code(job_id, 80)}…"
        placeholder = post_once(
            self.outlet,
            self.store,
            f"placeholder:{key}",
            channel,
            Message(text=text, blocks=(kit.section(text),)),
        )
        if self.jobs is None:
            raise PermanentError("job sources are not configured")
        try:
            logs = self.jobs.fetch(job_id, payload.get("cluster"), key=key)
        except JobNotFound as error:
            line, blocks = render.problem(str(error))
            self.outlet.update(placeholder, Message(text=line, blocks=tuple(blocks)))
            return
        task = DiagnoseTask(
            channel=channel,
            placeholder=placeholder,
            placeholder_top_level=True,
            user=payload["user"],
            job=logs,
        )
        self.diagnoser.run(task, key)

    def probe(self, node: str) -> dict[str, Any]:
        """The configured probe on one node; its JSON result (failed, with the reason, when it could
        not even be launched)."""
        from bot.services.probe import LauncherConfigs, run_probe
        from probes.launchers import KubernetesConfig, LaunchError, SlurmConfig, SshConfig
        from probes.options import ProbeOptions

        s = self.settings
        options = ProbeOptions(
            json=True, iters=s.probe_iters, max_bytes=s.probe_max_bytes, nproc=s.probe_nproc
        )
        launchers = LauncherConfigs(
            ssh=SshConfig(
                username=s.probe_ssh_user,
                port=s.probe_ssh_port,
                client_keys=[s.probe_ssh_key] if s.probe_ssh_key else [],
                known_hosts=s.probe_ssh_known_hosts,
            ),
            slurm=SlurmConfig(partition=s.probe_slurm_partition),
            k8s=KubernetesConfig(namespace=s.probe_k8s_namespace, image=s.probe_k8s_image),
        )
        try:
            result = run_probe(
                s.probe_via,
                [node],
                options,
                timeout=s.probe_timeout_s,
                launchers=launchers,
                database_url=s.database_url,
            )
        except LaunchError as error:
            return {"verdict": "failed", "reasons": [str(error)], "backend": "-", "world_size": 0}
        from bot.metrics import PROBE_VERDICTS

        PROBE_VERDICTS.labels(verdict=result.verdict).inc()
        return result.to_dict()
