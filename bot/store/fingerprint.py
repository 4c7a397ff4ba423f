"""Deterministic, versioned incident fingerprints: the same root cause on the same host always gets the
same fingerprint, whatever the log text around it. Never built from free text."""

from __future__ import annotations

import hashlib
import ipaddress

from matcher.model import Diagnosis

FINGERPRINT_VERSION = "v1"
NO_HOST = "-"


def normalise_host(host: str) -> str:
    """Lower-case, without the DNS domain: logs name one machine `GPU-NODE-017`, `gpu-node-017.` and
    `gpu-node-017.cluster.local` alike, and hostnames are unique within a cluster (the cluster is stored
    apart). IP addresses are kept whole, and digits are never touched: node 017 is not node 018."""
    name = host.strip().rstrip(".").lower()
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return name.split(".", 1)[0]
    return name


def culprit_hosts(diagnosis: Diagnosis) -> tuple[str, ...]:
    """Normalised culprit hosts, primary first: the analysis's `culprit_host` fact, then the culprit's
    hosts in the order it gave them."""
    named: list[str] = []
    primary = diagnosis.facts.get("culprit_host")
    if isinstance(primary, str) and primary.strip():
        named.append(primary)
    if diagnosis.culprit is not None:
        named.extend(diagnosis.culprit.hosts)
    hosts: list[str] = []
    for host in named:
        normalised = normalise_host(host)
        if normalised and normalised not in hosts:
            hosts.append(normalised)
    return tuple(hosts)


def fingerprint(class_id: str, signature_ids: tuple[str, ...] | list[str], hosts: tuple[str, ...]) -> str:
    """`v1:` + sha256 over the class, the sorted signature ids and the sorted normalised culprit hosts."""
    host_part = ",".join(sorted({normalise_host(h) for h in hosts})) or NO_HOST
    material = "\n".join((class_id, ",".join(sorted(set(signature_ids))), host_part))
    return f"{FINGERPRINT_VERSION}:{hashlib.sha256(material.encode()).hexdigest()}"


def diagnosis_fingerprint(diagnosis: Diagnosis) -> str:
    return fingerprint(diagnosis.primary.class_id, diagnosis.signature_ids, culprit_hosts(diagnosis))
