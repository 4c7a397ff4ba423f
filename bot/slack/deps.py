"""What every listener shares: settings, the Web API client, the outlet, the store, the durable
background work, the incident actions, the admin policy and the job sources; `start_diagnosis`, the one
way a request with files becomes a placeholder plus a queued task; and the handlers of the queued tasks."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from slack_sdk import WebClient

from bot.render import slack_incident as render
from bot.services.hooks import JobLogs, JobNotFound, JobSources
from bot.services.incidents import ActionError, IncidentActions
from bot.services.outlet import Message, MessageRef, Outlet
from bot.services.worker import Handler, PermanentError
from bot.settings import Settings
from bot.slack.files import SharedFile
from bot.slack.middleware import AdminPolicy
from bot.slack.work import DIAGNOSE, JOB, PROBE, Background, Diagnoser, DiagnoseTask

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
            threads=self.settings.diagnosis_concurrency,
            lease=timedelta(seconds=self.settings.work_lease_s),
        )

    def handlers(self) -> dict[str, Handler]:
        return {
            DIAGNOSE: lambda item: self.diagnoser.run(DiagnoseTask.from_payload(item.payload)),
            PROBE: lambda item: self._probe_task(item.payload),
            JOB: lambda item: self._job_task(item.payload),
        }

    def start_diagnosis(
        self,
        channel: str,
        *,
        thread: MessageRef | None,
        user: str | None,
        files: Sequence[SharedFile] = (),
        pasted: str | None = None,
        job: JobLogs | None = None,
        incident_id: int | None = None,
        edit: MessageRef | None = None,
        placeholder: MessageRef | None = None,
        key: str | None = None,
    ) -> MessageRef | None:
        """Post the placeholder ("Reading 30 MB from 2 files…", in `thread` when given) unless one is
        given, and commit the diagnosis to the work queue under `key` (the request's own id: the same
        request accepted twice is one task); returns the placeholder. Fast: no download happens here."""
        if placeholder is None:
            count = len(files) + (1 if pasted else 0)
            size = sum(f.size for f in files) + len((pasted or "").encode())
            text, blocks = render.placeholder(files=count, total_bytes=size, queued=self.background.ahead())
            try:
                placeholder = self.outlet.post(
                    channel, Message(text=text, blocks=tuple(blocks)), thread=thread
                )
            except Exception as error:  # Slack is down: the diagnosis still runs and posts when it can
                log.warning(
                    "placeholder not posted (%s); the result will be posted when Slack answers", error
                )
        task = DiagnoseTask(
            channel=channel,
            placeholder=placeholder,
            placeholder_top_level=thread is None,
            thread=thread,
            user=user,
            files=tuple(files),
            pasted=pasted,
            job=job,
            incident_id=incident_id,
            edit=edit,
        )
        group = f"incident:{incident_id}" if incident_id is not None else None
        self.background.submit(DIAGNOSE, key or f"request:{uuid.uuid4().hex}", task.to_payload(), group=group)
        return placeholder

    def queue_probe(
        self, key: str, node: str, user: str, *, incident_id: int | None, channel: str | None
    ) -> None:
        payload = {"node": node, "user": user, "incident": incident_id, "channel": channel}
        self.background.submit(PROBE, key, payload)

    def queue_job(
        self, key: str, job_id: str, cluster: str | None, *, channel: str, user: str, placeholder: MessageRef
    ) -> None:
        payload = {
            "job_id": job_id,
            "cluster": cluster,
            "channel": channel,
            "user": user,
            "placeholder": {"channel": placeholder.channel, "ts": placeholder.ts},
        }
        self.background.submit(JOB, key, payload)

    def _probe_task(self, payload: dict[str, Any]) -> None:
        try:
            self.actions.probe(
                payload.get("incident"),
                payload["node"],
                payload["user"],
                self.probe,
                channel=payload.get("channel"),
            )
        except ActionError as error:
            raise PermanentError(str(error)) from error

    def _job_task(self, payload: dict[str, Any]) -> None:
        """Fetch a job's logs through the job sources, then diagnose them like any upload."""
        placeholder = MessageRef(**payload["placeholder"])
        if self.jobs is None:
            raise PermanentError("job sources are not configured")
        try:
            logs = self.jobs.fetch(payload["job_id"], payload.get("cluster"))
        except JobNotFound as error:
            line, blocks = render.problem(str(error))
            self.outlet.update(placeholder, Message(text=line, blocks=tuple(blocks)))
            return
        task = DiagnoseTask(
            channel=payload["channel"],
            placeholder=placeholder,
            placeholder_top_level=True,
            user=payload["user"],
            job=logs,
        )
        self.diagnoser.run(task)

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
