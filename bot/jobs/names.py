"""Validation of every name that reaches a scheduler, a path template or a subprocess.

Anything else (spaces, shell or glob characters, a leading dash that would read as an option, `..`) is
refused with a one-line reason before it is used."""

from __future__ import annotations

import re

from bot.jobs.model import JobError
from probes.launchers.base import LaunchError, validate_host

# A Slurm job id: `1234`, an array task `1234_7`, or a heterogeneous component `1234+1`.
SLURM_JOB_ID = re.compile(r"^[0-9]{1,12}(?:_[0-9]{1,10}|\+[0-9]{1,4})?$")
# A job id of any source in the generic webhook payload and the directory template: a safe path token.
TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+:-]{0,254}$")
# Kubernetes object names (RFC 1123 subdomain, as PyTorchJob / JobSet names are).
K8S_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?$")


def job_token(value: str, what: str = "job id") -> str:
    """A job id or cluster name that is safe in a path and on a command line."""
    if not isinstance(value, str) or not TOKEN.match(value) or ".." in value:
        raise JobError(f"invalid {what} {value!r}: letters, digits and . _ @ + : - only")
    return value


def job_id(value: str) -> str:
    """Any source's job id: a token, or `namespace/name` for Kubernetes."""
    if not isinstance(value, str) or value.count("/") > 1:
        raise JobError(f"invalid job id {value!r}: a token, or NAMESPACE/NAME")
    for part in value.split("/"):
        job_token(part)
    return value


def slurm_job_id(value: str) -> str:
    if not isinstance(value, str) or not SLURM_JOB_ID.match(value):
        raise JobError(f"invalid Slurm job id {value!r}: expected 1234, 1234_7 (array task) or 1234+1")
    return value


def kubernetes_name(value: str, what: str = "Kubernetes name") -> str:
    if not isinstance(value, str) or not K8S_NAME.match(value):
        raise JobError(f"invalid {what} {value!r}: lower-case letters, digits, '-' and '.' only")
    return value


def host(value: str) -> str:
    """An RFC 1123 host name or an IP address (the probe launchers' rule)."""
    try:
        return validate_host(value)
    except LaunchError as error:
        raise JobError(str(error)) from None
