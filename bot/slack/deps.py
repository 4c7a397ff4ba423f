"""What every listener shares: settings, the Web API client, the outlet, the store, the background
runner, the incident actions, the admin policy and the job sources; and `start_diagnosis`, the one way a
request with files becomes a placeholder plus a background task."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient

from bot.render import slack_incident as render
from bot.services.hooks import JobLogs, JobSources
from bot.services.incidents import IncidentActions
from bot.services.outlet import Message, MessageRef, Outlet
from bot.settings import Settings
from bot.slack.files import SharedFile
from bot.slack.middleware import AdminPolicy
from bot.slack.work import Diagnoser, DiagnoseTask, Runner

log = logging.getLogger("ncclbot.slack")


@dataclass
class SlackDeps:
    settings: Settings
    client: WebClient
    outlet: Outlet
    store: Any
    runner: Runner
    diagnoser: Diagnoser
    actions: IncidentActions
    policy: AdminPolicy
    jobs: JobSources | None

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
    ) -> MessageRef | None:
        """Post the placeholder ("Reading 30 MB from 2 files…", in `thread` when given) unless one is
        given, and queue the diagnosis; returns the placeholder. Fast: no download happens here."""
        if placeholder is None:
            count = len(files) + (1 if pasted else 0)
            size = sum(f.size for f in files) + len((pasted or "").encode())
            text, blocks = render.placeholder(files=count, total_bytes=size, queued=self.runner.ahead())
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
        self.runner.submit(lambda: self.diagnoser.run(task))
        return placeholder

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
