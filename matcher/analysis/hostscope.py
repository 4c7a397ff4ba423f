"""Whether a bundle shows a job confined to one host, or spread over several.

A paste often holds one node's lines of a multi-node job, so one host name alone proves nothing. A bundle
counts as single-host only when every host it names is the same one AND something positive says the job
stays inside it: channels that use intra-node transports only (P2P, SHM; no NET/ channel), or nccl-tests'
device list placing every rank there, with no communicator larger than a host.
"""

from __future__ import annotations

from matcher.analysis.rankmap import RankMap
from matcher.model import Observation

# More ranks than one host holds: the job spans nodes even when only one node's lines are in the bundle.
GPUS_PER_HOST = 8
_INTRA_NODE = ("P2P/", "SHM/")


def one_host(observations: list[Observation], ranks: RankMap) -> bool:
    hosts = set(ranks.hosts) | {h for h in (ranks.host(o) for o in observations) if h}
    if len(hosts) != 1 or (ranks.world_size or 0) > GPUS_PER_HOST:
        return False
    transports = [str(o.fields["transport"]) for o in observations if "transport" in o.fields]
    if any(t.startswith("NET/") for t in transports):
        return False
    intra_node = any(t.startswith(_INTRA_NODE) for t in transports)
    listed = any(o.role == "context" and "host" in o.fields and "rank" in o.fields for o in observations)
    return intra_node or listed


def several_hosts(observations: list[Observation], ranks: RankMap) -> bool:
    """Provably more than one host: two host names, an inter-node (NET/) channel, or more ranks than one
    host holds."""
    hosts = set(ranks.hosts) | {h for h in (ranks.host(o) for o in observations) if h}
    inter_node = any(str(o.fields.get("transport", "")).startswith("NET/") for o in observations)
    return len(hosts) > 1 or inter_node or (ranks.world_size or 0) > GPUS_PER_HOST
