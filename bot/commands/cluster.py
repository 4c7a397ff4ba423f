"""`ncclbot node drain|resume HOST` and `ncclbot job requeue JOB --exclude HOST`: the recovery actions
of the Slack buttons, from a shell (same service, same audit log)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bot.cli import UsageError
from bot.jobs.model import ActionError, ActionOutcome, JobError
from bot.services.cluster_actions import Actor, ClusterActionService
from bot.settings import SettingsError, load_settings
from bot.store import Store


def register(subparsers: Any) -> None:
    node = subparsers.add_parser(
        "node", help="drain or resume a node (Slurm scontrol, Kubernetes cordon+taint)"
    )
    node_actions = node.add_subparsers(dest="node_action", metavar="ACTION", required=True)
    drain = node_actions.add_parser("drain", help="take a node out of scheduling")
    drain.add_argument("host")
    drain.add_argument("--reason", help="why (stored with the node; default names the incident)")
    drain.add_argument("--incident", type=int, help="incident id: the reason becomes 'ncclbot #ID: CLASS'")
    resume = node_actions.add_parser("resume", help="put a drained node back into service")
    resume.add_argument("host")
    resume.add_argument("--incident", type=int, help="incident id the resume belongs to (audit log)")
    for parser in (drain, resume):
        _common(parser)
        parser.set_defaults(handler=run_node)

    job = subparsers.add_parser("job", help="act on a job (requeue it away from a bad node)")
    job_actions = job.add_subparsers(dest="job_action", metavar="ACTION", required=True)
    requeue = job_actions.add_parser("requeue", help="requeue a job, excluding nodes")
    requeue.add_argument("job_id", metavar="JOB")
    requeue.add_argument(
        "--exclude", action="append", default=[], metavar="HOST", help="node to avoid (repeatable)"
    )
    requeue.add_argument("--incident", type=int, help="incident id the requeue belongs to (audit log)")
    _common(requeue)
    requeue.set_defaults(handler=run_job)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", help="cluster name (picks the job source / actions configured for it)")
    parser.add_argument(
        "--dry-run", action="store_true", default=None, help="print what would run, change nothing"
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")


def run_node(args: argparse.Namespace) -> int:
    def act(service: ClusterActionService) -> ActionOutcome:
        if args.node_action == "drain":
            return service.drain(
                Actor.cli(), args.host, reason=args.reason, incident_id=args.incident, cluster=args.cluster
            )
        return service.resume(Actor.cli(), args.host, incident_id=args.incident, cluster=args.cluster)

    return _run(args, act)


def run_job(args: argparse.Namespace) -> int:
    def act(service: ClusterActionService) -> ActionOutcome:
        return service.requeue(
            Actor.cli(), args.job_id, exclude=args.exclude, incident_id=args.incident, cluster=args.cluster
        )

    return _run(args, act)


def _run(args: argparse.Namespace, act: Any) -> int:
    try:
        settings = load_settings(for_server=False)
    except SettingsError as error:
        raise UsageError(f"settings: {error}") from None
    try:
        with Store.open(settings.database_url) as store:
            outcome = act(ClusterActionService(settings=settings, store=store, dry_run=args.dry_run))
    except ActionError as error:
        print(f"ncclbot: {error}", file=sys.stderr)
        return 1
    except JobError as error:
        print(f"ncclbot: {error}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(
            {
                "action": outcome.action,
                "target": outcome.target,
                "dry_run": outcome.dry_run,
                "steps": list(outcome.steps),
                "detail": outcome.detail,
            },
            sys.stdout,
        )
        sys.stdout.write("\n")
        return 0
    verb = "would run" if outcome.dry_run else "ran"
    print(f"{outcome.action} {outcome.target}: {outcome.detail or 'done'}")
    for step in outcome.steps:
        print(f"  {verb}: {step}")
    return 0
