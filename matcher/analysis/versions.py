"""Different software versions reported by different hosts / ranks of one job.

Every node of a job must load the same NCCL (and the same PyTorch / CUDA build): peers on different NCCL
releases can hang or fail in their first collective, and the error lines rarely say so. Versions are
compared per (signature, field), so the same kind of line is compared with itself (the CUDA version NCCL
was built for is not the driver's CUDA version), and only their release numbers count ("2.3.1+cu121" and
"2.3.1" are one release).
"""

from __future__ import annotations

import re
from collections import defaultdict

from matcher.analysis.rankmap import RankMap
from matcher.model import Observation
from matcher.rules import rules

VERSION_FIELDS = ("nccl_version", "torch_version", "cuda_version", "driver_version")
# Evidence, not proof (rules.toml `version_mismatch_mass`): the mismatch may be harmless, so it supports
# the class without outweighing an error line of another class.
_RELEASE = re.compile(r"\d+(?:\.\d+){0,2}")


def release_tuple(value: object, name: str = "") -> tuple[int, ...] | None:
    """ "2.7.8+cuda10.2" -> (2, 7, 8): comparable release numbers, None when there are none."""
    found = _RELEASE.match(str(value).strip().lstrip("vV"))
    if not found:
        return None
    parts = tuple(int(part) for part in found.group(0).split("."))
    if name == "nccl_version" and len(parts) == 3 and parts[0] >= 10:
        # PyTorch 1.x decoded NCCL >= 2.9's version code (major*10000 + minor*100 + patch) with the old
        # scheme (major*1000 + minor*100 + patch) and printed 2.10.3 as "21.0.3".
        code = parts[0] * 1000 + parts[1] * 100 + parts[2]
        parts = (code // 10000, code % 10000 // 100, code % 100)
    return parts


def differing_versions(observations: list[Observation], ranks: RankMap) -> list[Observation]:
    """One line per distinct release of a version field that differs across hosts (or ranks), else []."""
    # (signature, field) -> release -> {who: first line}
    seen: dict[tuple[str, str], dict[str, dict[str, Observation]]] = defaultdict(lambda: defaultdict(dict))
    for obs in observations:
        if obs.role != "context":
            continue
        host, rank = ranks.host(obs), ranks.rank(obs)
        who = f"host {host}" if host else (f"rank {rank}" if rank is not None else None)
        if who is None:
            continue  # a version line nobody can be tied to may be pasted from another run
        for name in VERSION_FIELDS:
            release = release_tuple(obs.fields[name], name) if name in obs.fields else None
            if release is not None:
                seen[(obs.signature, name)][".".join(map(str, release))].setdefault(who, obs)
    evidence: list[Observation] = []
    for releases in seen.values():
        reporters = [set(by_who) for by_who in releases.values()]
        if len(releases) < 2 or _same_reporters_only(reporters):
            continue
        for by_who in releases.values():
            evidence.append(next(iter(by_who.values())))
    return evidence


# What the network lines are compared as (rules.toml [settings.classes]).
_SETTING_OF = {"nccl-net-plugin-state": "NET_PLUGIN", "nccl-network-in-use": "NET_TRANSPORT"}
_INTERNAL_PLUGIN = ("No plugin found", "Could not find")


def differing_settings(observations: list[Observation], ranks: RankMap) -> dict[str, list[Observation]]:
    """class -> one line per distinct value of an NCCL_* setting (or network plugin) that differs across
    hosts. Only hosts that printed the setting count: a paste missing a host's lines proves nothing."""
    seen: dict[str, dict[str, dict[str, Observation]]] = defaultdict(lambda: defaultdict(dict))
    for obs in observations:
        if obs.role != "context" or "setting_value" not in obs.fields:
            continue
        host = ranks.host(obs)
        if not host:
            continue
        name = str(obs.fields.get("setting", _SETTING_OF.get(obs.signature, obs.signature)))
        value = str(obs.fields["setting_value"]).strip()
        value = "internal" if value.startswith(_INTERNAL_PLUGIN) else value
        seen[name][value].setdefault(host, obs)
    found: dict[str, list[Observation]] = defaultdict(list)
    for name, values in seen.items():
        hosts_per_value = [set(by_host) for by_host in values.values()]
        if len(values) < 2 or len(set().union(*hosts_per_value)) < 2:
            continue
        if any(len(h & other) for i, h in enumerate(hosts_per_value) for other in hosts_per_value[i + 1 :]):
            continue  # one host with two values: several runs pasted together, not a split
        cls = rules().setting_classes.get(name, rules().setting_default_class)
        found[cls].extend(next(iter(by_host.values())) for by_host in values.values())
    return dict(found)


def _same_reporters_only(reporters: list[set[str]]) -> bool:
    """Two releases named by the same single process (a build line and a runtime line) are no split."""
    everyone = set().union(*reporters)
    return len(everyone) < 2


# NCCL prints the CUDA its build targets ("NCCL version 2.21.5+cuda12.4") and the CUDA version the driver
# supports ("cudaDriverVersion 11080" = 11.8). CUDA's minor-version compatibility lets a 12.4 build run on
# any 12.x driver; a build for a newer major CUDA than the driver's cannot initialise.
_DRIVER_CUDA = re.compile(r"^\d{4,5}$")


def build_newer_than_driver(observations: list[Observation]) -> list[Observation]:
    """The build line and the driver line when an NCCL/torch build targets a newer major CUDA than the
    driver supports, else []."""
    builds = [o for o in observations if o.role == "context" and "cuda_version" in o.fields]
    drivers = [
        o
        for o in observations
        if o.role == "context" and _DRIVER_CUDA.match(str(o.fields.get("driver_version", "")))
    ]
    if not builds or not drivers:
        return []
    driver_major = min(int(str(o.fields["driver_version"])) // 1000 for o in drivers)
    newer = [
        o
        for o in builds
        if (release_tuple(o.fields["cuda_version"], "cuda_version") or (0,))[0] > driver_major
    ]
    if not newer:
        return []
    oldest = min(drivers, key=lambda o: int(str(o.fields["driver_version"])))
    return [newer[0], oldest]
