"""Slurm's cluster actions through scontrol: drain or resume a node, requeue a job away from nodes.

Requeue is `requeuehold` -> `update ExcNodeList` -> `release`: held, the job cannot start on the bad
node between the requeue and the exclusion. Slurm itself enforces who may do this (SlurmUser, root or
an operator); its refusal comes back as the action's error.

Nodes are looked up (`scontrol show node`) before they are changed: on a one-node cluster Slurm 22.05
applies `scontrol update NodeName=<any unknown name>` to its only node and exits 0.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from bot.jobs import names
from bot.jobs.model import ActionError, ActionOutcome
from bot.jobs.slurm import text
from bot.jobs.slurm.commands import SlurmCommands, first_line
from bot.render.safe_text import strip_controls

MAX_REASON_CHARS = 200


def drain_reason(reason: str) -> str:
    """One printable line (Slurm stores it verbatim and prints it in `sinfo -R`)."""
    line = " ".join(strip_controls(reason).split())
    if not line:
        raise ActionError("a drain needs a reason")
    return line[:MAX_REASON_CHARS]


@dataclass
class SlurmActions:
    kind = "slurm"

    commands: SlurmCommands = field(default_factory=SlurmCommands)

    def drain(self, host: str, reason: str, *, dry_run: bool) -> ActionOutcome:
        node = names.host(host)
        argv = self.commands.argv(
            "scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={drain_reason(reason)}"
        )
        if dry_run:
            return self._run("drain", node, [argv], dry_run=True)
        self.node_state(node)  # an unknown node: 22.05's `scontrol update` says nothing and exits 0
        done = self._run("drain", node, [argv], dry_run=False)
        state = self.node_state(node)
        if "DRAIN" not in state:
            raise ActionError(f"drain {node}: Slurm took the update but the node is {state}")
        return ActionOutcome(done.action, node, False, done.steps, detail=f"State={state}")

    def resume(self, host: str, *, dry_run: bool) -> ActionOutcome:
        node = names.host(host)
        argv = self.commands.argv("scontrol", "update", f"NodeName={node}", "State=RESUME")
        if not dry_run:
            state = self.node_state(node)
            if "DRAIN" not in state and "DOWN" not in state:
                return ActionOutcome(
                    "resume", node, dry_run, (), detail=f"{node} is not drained (State={state})"
                )
        return self._run("resume", node, [argv], dry_run=dry_run)

    def requeue(self, job_id: str, *, exclude: list[str], dry_run: bool) -> ActionOutcome:
        job = names.slurm_job_id(job_id)
        hosts = [names.host(h) for h in exclude]
        steps = [self.commands.argv("scontrol", "requeuehold", job)]
        if hosts:
            steps.append(
                self.commands.argv("scontrol", "update", f"JobId={job}", f"ExcNodeList={','.join(hosts)}")
            )
        steps.append(self.commands.argv("scontrol", "release", job))
        if not dry_run:
            for node in hosts:  # an unknown node would fail the update and leave the job held
                self.node_state(node)
        return self._run("requeue", job, steps, dry_run=dry_run)

    def node_state(self, host: str) -> str:
        shown = self.commands.run("scontrol", "show", "node", names.host(host))
        if shown.returncode != 0:
            raise ActionError(f"scontrol show node {host}: {first_line(shown)}")
        records = text.parse_records(shown.stdout, text.NODE_FREE_TEXT)
        return (records[0].get("State") if records else None) or "UNKNOWN"

    def _run(self, action: str, target: str, steps: list[list[str]], *, dry_run: bool) -> ActionOutcome:
        shown = tuple(shlex.join(argv) for argv in steps)
        if dry_run:
            return ActionOutcome(action, target, True, shown, detail="dry run: nothing was changed")
        for index, argv in enumerate(steps):
            outcome = self.commands.execute(argv)
            if outcome.returncode != 0:
                left = f" ({index} of {len(steps)} steps done: {'; '.join(shown[:index])})" if index else ""
                raise ActionError(
                    f"{action} {target} failed at `{shown[index]}`: {first_line(outcome)}{left}"
                )
        return ActionOutcome(action, target, False, shown)
