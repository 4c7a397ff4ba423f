"""Suggestions for a job that hung right after NCCL initialisation without printing any error.

NCCL logged its setup (bootstrap interface, channel transports) and then nothing: no root line, no
timeout, no peer error. The logs cannot prove a cause, so `unknown` stays first at low confidence; the
runners-up are what an expert checks next, ranked by what the setup lines show:

- one host (intra-node transports only) or consumer GPUs: PCIe peer-to-peer first (ACS/IOMMU, GeForce
  boards without working P2P; `NCCL_P2P_DISABLE=1` tells), then mismatched driver/NCCL builds;
- several hosts over sockets: the interface NCCL bound, then NCCL/driver/PyTorch builds that differ
  across nodes (an old NCCL release makes that the first suspect);
- GPUDirect RDMA paths (`NET/IB/.../GDRDMA`): the fabric connected, so the driver / peer-memory stack
  comes first, then the IB transport, then PCIe ACS between the NIC and the GPU.

Two setups are telling enough to lead, above `unknown` at a moderate confidence: a log whose last setup
lines are NCCL's NVLS (NVLink SHARP) setup (the multicast bind never returned: NCCL_NVLS_ENABLE=0), and one
host of consumer GPUs (channels over P2P, or every rank listed on that host): the classic GeForce
peer-to-peer hang. A bootstrap address in
docker's default bridge network in a job that spans hosts is not reachable from the other hosts, so the
interface leads there too.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from dataclasses import dataclass, field

from matcher.analysis.crossrank import TableVerdict
from matcher.analysis.hostscope import GPUS_PER_HOST, one_host
from matcher.analysis.priors import priors
from matcher.analysis.rankmap import RankMap
from matcher.analysis.versions import release_tuple
from matcher.model import FRFinding, Observation
from matcher.taxonomy import UNKNOWN

P2P = "p2p/pcie-acs"
VERSION = "config/version-mismatch"
INTERFACE = "network/interface-selection"
IB = "network/ib-rdma"
SHM = "shm/dev-shm"
ALGORITHM = "nccl/nvls-or-algorithm"

# Releases before this are years old: peers on other nodes rarely run the same one, and many hangs
# fixed since were NCCL bugs.
OLD_NCCL = (2, 12)
# A setup that names its suspect outright leads instead: this much mass on top of the branch's own.
TELLING_MASS = 1.3
NVLS = "NVLS"
# Docker's default bridge (172.17.0.0/16, handed out from 172.17.0.2 up): every host's containers get the
# same addresses, unreachable from other hosts. Only its first /24: pod networks of Kubernetes clusters
# often live elsewhere in 172.16.0.0/12 (e.g. 172.17.80.0/20) and are routable.
DOCKER_BRIDGE = ipaddress.ip_network("172.17.0.0/24")
_SETUP_FIELDS = ("transport", "interface")
# What a launcher says when the job is stopped from outside (a user's Ctrl-C on the hang, scancel, a time
# limit): no error of the job's own, so the hang stays silent. A hang said in words (hang-prose) is the
# same silence, told by the user.
STOPPED_SYMPTOMS = frozenset({"child-failed", "task-killed", "hang-reported"})


@dataclass(slots=True)
class Suggestions:
    masses: dict[str, float] = field(default_factory=dict)
    evidence: dict[str, list[Observation]] = field(default_factory=lambda: defaultdict(list))
    seen: str = ""  # what the setup lines showed, for the reason

    @property
    def no_culprit_reason(self) -> str:
        return (
            f"the job hung right after NCCL initialisation ({self.seen}) without any error line, "
            "so no rank or host can be named"
        )

    def add(self, cls: str, amount: float, observations: list[Observation]) -> None:
        self.masses[cls] = self.masses.get(cls, 0.0) + amount
        self.evidence[cls].extend(observations)


def setup_lines(observations: list[Observation]) -> list[Observation]:
    """NCCL's communicator-setup facts: bootstrap / socket interface, channel transport and communicator
    init lines (a rank together with the communicator size)."""
    return [
        o
        for o in observations
        if o.role == "context"
        and (any(k in o.fields for k in _SETUP_FIELDS) or ("rank" in o.fields and "world_size" in o.fields))
    ]


def silent(cascades: list[Observation], table: TableVerdict, fr: FRFinding | None) -> bool:
    """Nothing reported a failure: no timeout, peer or NCCL error, at most the job being stopped."""
    stopped_only = all(o.symptom in STOPPED_SYMPTOMS and not o.classes for o in cascades)
    return stopped_only and table.kind == "none" and (fr is None or fr.kind == "no-issue")


def suggest(observations: list[Observation], ranks: RankMap) -> Suggestions | None:
    """Runners-up for a hang after NCCL init, or None when the bundle shows no NCCL setup at all."""
    setup = setup_lines(observations)
    if not setup or _progressed_after(setup, observations) or _hung_later_in_words(observations):
        return None
    transports = [o for o in setup if "transport" in o.fields]
    interfaces = [o for o in setup if "interface" in o.fields]
    p2p_lines = [o for o in transports if str(o.fields["transport"]).startswith("P2P")]
    shm_lines = [o for o in transports if str(o.fields["transport"]).startswith("SHM")]
    net_lines = [o for o in transports if str(o.fields["transport"]).startswith("NET/")]
    gdr_lines = [o for o in net_lines if "GDRDMA" in str(o.fields["transport"])]
    ib_lines = [o for o in net_lines if str(o.fields["transport"]).startswith("NET/IB")]
    consumer = [o for o in observations if o.role == "context" and P2P in o.classes]
    versions = [o for o in observations if o.role == "context" and "nccl_version" in o.fields]
    old = [o for o in versions if _is_old(o.fields["nccl_version"])]
    hosts = {h for h in (ranks.host(o) for o in setup) if h}
    several_hosts = len(hosts) > 1 or bool(net_lines) or (ranks.world_size or 0) > GPUS_PER_HOST

    out = Suggestions(seen=_seen(hosts, several_hosts, transports, consumer, old))
    out.add(UNKNOWN, priors().hang_after_init_unknown, setup)
    nvls_lines = [o for o in transports if o.fields["transport"] == NVLS]
    if nvls_lines:
        stuck_in_nvls = _last_setup_is_nvls(setup)
        out.add(ALGORITHM, TELLING_MASS if stuck_in_nvls else 0.5, nvls_lines)
    bridged = [o for o in interfaces if _on_docker_bridge(o.fields.get("ip"))]
    if several_hosts and bridged:
        out.add(INTERFACE, TELLING_MASS - 0.5, bridged)
    peer_to_peer = p2p_lines + consumer
    if not several_hosts:
        out.add(P2P, 0.6 + (0.2 if peer_to_peer else 0.0), peer_to_peer or setup)
        # Consumer boards whose ranks provably share one host talk over PCIe P2P (or SHM when P2P is off).
        if consumer and (p2p_lines or one_host(observations, ranks)):
            out.add(P2P, TELLING_MASS - 0.8, consumer)
        out.add(VERSION, 0.35 + (0.15 if old else 0.0), old or versions)
        if shm_lines:
            out.add(SHM, 0.2, shm_lines)
        out.add(ALGORITHM, 0.15, versions)
        return out
    if gdr_lines:
        out.add(VERSION, 0.6 + (0.1 if old else 0.0), old or versions or gdr_lines)
        out.add(IB, 0.5, gdr_lines)
        out.add(P2P, 0.3, gdr_lines)
    elif ib_lines:
        out.add(IB, 0.55, ib_lines)
        out.add(VERSION, 0.45 + (0.1 if old else 0.0), old or versions)
        out.add(INTERFACE, 0.3, interfaces)
    else:
        out.add(INTERFACE, 0.6, interfaces or setup)
        out.add(VERSION, 0.45 + (0.2 if old else 0.0), old or versions)
    if peer_to_peer:
        out.add(P2P, 0.25, peer_to_peer)
    return out


def _last_setup_is_nvls(setup: list[Observation]) -> bool:
    """Some process's last setup line is NVLS setup: it never got past it (no Init COMPLETE), and the
    others wait for it. Processes are told apart by their `host:pid` prefix within each file."""
    last: dict[tuple[str, str | None, int | None], Observation] = {}
    for o in setup:
        process = (o.line.source, o.line.host, o.line.pid)
        if process not in last or o.line.lineno >= last[process].line.lineno:
            last[process] = o
    return any(o.fields.get("transport") == NVLS for o in last.values())


def _on_docker_bridge(ip: object) -> bool:
    try:
        return ipaddress.ip_address(str(ip)) in DOCKER_BRIDGE
    except ValueError:
        return False


def _is_old(nccl_version: object) -> bool:
    release = release_tuple(nccl_version, "nccl_version")
    return release is not None and release < OLD_NCCL


def _seen(
    hosts: set[str],
    several_hosts: bool,
    transports: list[Observation],
    consumer: list[Observation],
    old: list[Observation],
) -> str:
    parts = [f"{len(hosts)} hosts" if len(hosts) > 1 else ("several hosts" if several_hosts else "one host")]
    kinds = sorted({_family(str(o.fields["transport"])) for o in transports})
    if kinds:
        parts.append("transports " + ", ".join(kinds))
    if consumer:
        parts.append("consumer GPUs")
    if old:
        parts.append(f"NCCL {old[0].fields['nccl_version']}, an old release")
    return "; ".join(parts)


def _family(transport: str) -> str:
    """ "NET/IB/0(4)/GDRDMA" -> "NET/IB GDRDMA", "P2P/IPC/read" -> "P2P/IPC": kind, not device."""
    family = "/".join(transport.split("/")[:2])
    return f"{family} GDRDMA" if "GDRDMA" in transport else family


def _hung_later_in_words(observations: list[Observation]) -> bool:
    """The user says where it hung, and that was after training started (an epoch's end, a checkpoint,
    mid-run): the setup lines in the paste are no sign of a hang at setup."""
    later = priors().hang_stages_after_setup
    return any(o.signature in later for o in observations)


def _progressed_after(setup: list[Observation], observations: list[Observation]) -> bool:
    """Training progress logged after the setup lines: the job did not hang at init."""
    last_line: dict[str, int] = {}
    for o in setup:
        last_line[o.line.source] = max(o.line.lineno, last_line.get(o.line.source, 0))
    times = [o.line.time for o in setup if o.line.time is not None]
    for obs in observations:
        if obs.role != "context" or "step" not in obs.fields:
            continue
        if obs.line.source in last_line and obs.line.lineno > last_line[obs.line.source]:
            return True
        if times and obs.line.time is not None and obs.line.time > max(times):
            return True
    return False
