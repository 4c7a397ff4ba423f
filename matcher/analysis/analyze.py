"""Cross-rank analysis: observations (+ a Flight Recorder finding) -> ranked classes, symptom, culprit.

`analyze(scan, fr)` is a pure function. Root lines anywhere in the bundle decide the class; cascade lines
(what waiting or abandoned ranks say) only establish the symptom, and their own classes (peer exit) win
only when no root line exists. Without any root line the timeout family is split with context clues, the
cross-rank table and Flight Recorder (`matcher.analysis.timeouts`); a job that printed its NCCL setup and
then nothing gets `unknown` with ranked suggestions (`matcher.analysis.setup_hang`); versions that differ
across hosts support config/version-mismatch in every case (`matcher.analysis.versions`). The culprit
follows the rules of `matcher.analysis.culprit`.

Facts: KNOWN_FIELDS values of the primary's evidence and the cross-rank table, job-wide versions and world
size, `culprit_rank` / `culprit_host`, and `since_progress_ms` (`matcher.analysis.progress`: milliseconds
from the last timestamped progress line to the first failure line after it, where both are known)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from matcher.analysis import crossrank, hostscope, progress, scoring, setup_hang, versions
from matcher.analysis.crossrank import TableVerdict
from matcher.analysis.culprit import decide
from matcher.analysis.rankmap import RankMap, build_rank_map
from matcher.analysis.timeouts import RANK0, infer
from matcher.model import (
    KNOWN_FIELDS,
    ClassScore,
    Culprit,
    Diagnosis,
    Evidence,
    FieldValue,
    FRFinding,
    Observation,
    ScanResult,
)
from matcher.taxonomy import CLASSES, UNKNOWN, title

MAX_CLASSES = 5
UNKNOWN_ALONE_CONFIDENCE = 0.3
# Most telling first: what the healthy ranks were doing beats how they were torn down.
SYMPTOM_ORDER = (
    "collective-timeout",
    "watchdog-hang",
    "missing-rank",
    "communicator-aborted",
    "nccl-error",
    "cuda-error",
    "remote-error",
    "peer-closed",
    "connection-reset",
    "store-lost",
    "task-killed",
    "sigkill",
    "sigabrt",
    "child-failed",
    "process-teardown",
)
_CONTEXT_FACTS = ("nccl_version", "torch_version", "cuda_version", "driver_version", "world_size")
_TABLE_FACTS = ("seqnum", "optype", "pg", "timeout_ms", "numel_in")
# Xids that usually mean an application fault (bad address, illegal instruction) rather than hardware.
_APPLICATION_XIDS = {"13", "31", "43"}
# A generic error class that echoes another class's own report of the same fault: a sticky CUDA error
# (illegal access) first caught by NCCL's own CUDA check inside its kernels / enqueue surfaces again
# in the framework's "CUDA error: ..." afterwards; only lines before NCCL's report speak for the echo.
_ECHOES = {"cuda/illegal-access": "nccl/nvls-or-algorithm"}
ECHO_FACTOR = 0.4
VERSION_CLASS = "config/version-mismatch"
# A bare ncclSystemError is read as a socket that cannot reach its peer; on one host (peers over loopback)
# the shared-memory segment that did not fit /dev/shm is the likelier failed system call.
INTERFACE_CLASS = "network/interface-selection"
ONE_HOST_SOCKET_FACTOR = 0.4
# A retry timeout (status 12) right after init on RoCE devices, with no GID index chosen (or a different one
# per host): the maintainers' first answer is the GID index, ahead of the generic IB transport reading.
ROCE_CLASS = "network/roce-gid"
IB_CLASS = "network/ib-rdma"
ROCE_LEAD = 0.25
ROCE_LINK = "RoCE"  # the link layer NCCL prints after an IB device it uses


def analyze(scan: ScanResult, fr: FRFinding | None = None) -> Diagnosis:
    observations = list(scan.observations)
    rm = build_rank_map(observations, scan.sources)
    roots = scoring.by_class(observations, "root")
    cascades = [o for o in observations if o.role == "cascade"]
    table = crossrank.judge(observations, rm)

    masses: dict[str, float] = {}
    support: dict[str, list[Observation]] = {}
    extra_evidence: dict[str, tuple[Evidence, ...]] = {}
    after_init: setup_hang.Suggestions | None = None
    if roots:
        for cls, obs in roots.items():
            masses[cls] = scoring.mass(obs, rm)
            support[cls] = obs
        _demote_application_xids(roots, masses)
        _demote_echoes(roots, masses)
        _roce_gid_first(observations, roots, masses, rm)
        for cls, obs in scoring.by_class(observations, "cascade").items():
            if cls not in masses:  # listed as a runner-up only
                masses[cls] = 0.1 * scoring.mass(obs, rm)
                support[cls] = obs
    else:
        for cls, obs in scoring.by_class(observations, "cascade").items():
            masses[cls] = scoring.CASCADE_DISCOUNT * scoring.mass(obs, rm)
            support[cls] = obs
        if INTERFACE_CLASS in masses and hostscope.one_host(observations, rm):
            masses[INTERFACE_CLASS] *= ONE_HOST_SOCKET_FACTOR
        inference = infer(observations, cascades, table, fr, rm)
        for cls, amount in inference.masses.items():
            masses[cls] = masses.get(cls, 0.0) + amount
            support.setdefault(cls, []).extend(inference.evidence.get(cls, []))
        silent = setup_hang.silent(cascades, table, fr)
        suggestions = setup_hang.suggest(observations, rm) if silent else None
        if suggestions is not None:
            after_init = suggestions
            for cls, amount in suggestions.masses.items():
                masses[cls] = masses.get(cls, 0.0) + amount
                support.setdefault(cls, []).extend(suggestions.evidence.get(cls, []))
    split = versions.differing_versions(observations, rm)
    if split:
        masses[VERSION_CLASS] = masses.get(VERSION_CLASS, 0.0) + versions.MISMATCH_MASS
        support.setdefault(VERSION_CLASS, []).extend(split)
    if fr is not None and fr.evidence:
        for cls in masses:
            if cls.startswith("timeout/") or cls == UNKNOWN:
                extra_evidence[cls] = fr.evidence[:1]

    pinned = [o for o in table.evidence if rm.rank(o) in table.culprits]
    ranked = _rank(masses, support, cascades, extra_evidence, pinned)
    primary = ranked[0].class_id
    rank0_clue = next((o for o in support.get(RANK0, []) if o.role == "context"), None)
    decision = decide(primary, roots.get(primary, []), cascades, observations, table, fr, rm, rank0_clue)
    if after_init is not None and decision.culprit is None:
        decision = replace(decision, no_culprit_reason=after_init.no_culprit_reason)
    facts = _facts(primary, support.get(primary, []), observations, table, decision.culprit)
    return Diagnosis(
        diagnoses=ranked,
        culprit=decision.culprit,
        symptom=_symptom(cascades, fr),
        stats=replace(scan.stats, ranks=max(scan.stats.ranks, len(rm.known))),
        facts=facts,
        no_culprit_reason=decision.no_culprit_reason,
    )


def _demote_application_xids(roots: dict[str, list[Observation]], masses: dict[str, float]) -> None:
    xid_obs = roots.get("hardware/gpu-xid", [])
    xids = {str(o.fields.get("xid")) for o in xid_obs}
    if xid_obs and "cuda/illegal-access" in masses and xids <= _APPLICATION_XIDS:
        masses["hardware/gpu-xid"] *= 0.4


def _demote_echoes(roots: dict[str, list[Observation]], masses: dict[str, float]) -> None:
    for echo, origin in _ECHOES.items():
        if echo not in masses or origin not in roots:
            continue
        first = min(roots[origin], key=scoring.chronological_key)
        if all(_follows(o, first) for o in roots[echo]):
            masses[echo] *= ECHO_FACTOR


def _roce_gid_first(
    observations: list[Observation],
    roots: dict[str, list[Observation]],
    masses: dict[str, float],
    rm: RankMap,
) -> None:
    if ROCE_CLASS not in roots or IB_CLASS not in masses:
        return
    context = [o for o in observations if o.role == "context"]
    roce_hosts = {rm.host(o) for o in context if o.fields.get("transport") == ROCE_LINK}
    if not roce_hosts:
        return
    settings = [o for o in context if "gid_index" in o.fields]
    chosen = {str(o.fields["gid_index"]) for o in settings}
    if len(chosen) == 1 and roce_hosts <= {rm.host(o) for o in settings}:
        return  # one index set on every RoCE host: the GID was picked on purpose
    first = min(roots[ROCE_CLASS], key=scoring.chronological_key)
    if any("step" in o.fields and _follows(first, o) for o in context):
        return  # training ran before the error: not a path that never worked
    masses[ROCE_CLASS] = max(masses[ROCE_CLASS], masses[IB_CLASS]) + ROCE_LEAD


def _follows(later: Observation, earlier: Observation) -> bool:
    """`later` was written with or after `earlier`: by time where both lines have one, else by position
    in the same file; lines that cannot be ordered do not count as following."""
    if later.line.time is not None and earlier.line.time is not None:
        return later.line.time >= earlier.line.time
    return later.line.source == earlier.line.source and later.line.lineno >= earlier.line.lineno


def _rank(
    masses: dict[str, float],
    support: dict[str, list[Observation]],
    cascades: list[Observation],
    extra_evidence: dict[str, tuple[Evidence, ...]],
    pinned: list[Observation],
) -> tuple[ClassScore, ...]:
    known = {c: m for c, m in masses.items() if m > 0 and c in CLASSES}
    if not known or set(known) == {UNKNOWN}:
        evidence = scoring.excerpts(cascades)
        return (ClassScore(UNKNOWN, UNKNOWN_ALONE_CONFIDENCE, title(UNKNOWN), evidence),)
    conf = scoring.confidences(known)
    order = sorted(conf, key=lambda c: (-conf[c], c))[:MAX_CLASSES]
    scores = []
    for cls in order:
        backing = support.get(cls, [])
        first = [o for o in pinned if o in backing] if cls.startswith("timeout/") else []
        evidence = scoring.excerpts(backing or cascades, pinned=first)
        evidence = (evidence + extra_evidence.get(cls, ()))[: scoring.EVIDENCE_PER_CLASS]
        scores.append(ClassScore(cls, round(conf[cls], 4), title(cls), evidence))
    return tuple(scores)


def _symptom(cascades: list[Observation], fr: FRFinding | None) -> str | None:
    seen = Counter(o.symptom for o in cascades if o.symptom)
    if seen:
        return min(
            seen,
            key=lambda s: (SYMPTOM_ORDER.index(s) if s in SYMPTOM_ORDER else len(SYMPTOM_ORDER), -seen[s]),
        )
    if fr is not None and fr.kind != "no-issue":
        return "collective-timeout"  # dumps are written when the watchdog fires
    return None


def _facts(
    primary: str,
    primary_obs: list[Observation],
    observations: list[Observation],
    table: TableVerdict,
    culprit: Culprit | None,
) -> dict[str, FieldValue]:
    facts: dict[str, FieldValue] = {}
    for obs in sorted(primary_obs, key=scoring.chronological_key):
        for key, value in obs.fields.items():
            if key in KNOWN_FIELDS:
                facts.setdefault(key, value)
    for key in _TABLE_FACTS:
        value = getattr(table, key)
        if value is not None and (primary.startswith("timeout/") or primary == UNKNOWN or key not in facts):
            facts.setdefault(key, value)
    for obs in observations:
        if obs.role == "context":
            for key in _CONTEXT_FACTS:
                if key in obs.fields:
                    facts.setdefault(key, obs.fields[key])
    # A rank/host taken from one evidence line would be mistaken for the culprit downstream.
    facts.pop("rank", None)
    facts.pop("host", None)
    if "nccl_version" in facts:
        release = versions.release_tuple(facts["nccl_version"], "nccl_version")
        if release is not None and not str(facts["nccl_version"]).startswith(f"{release[0]}."):
            facts["nccl_version"] = ".".join(map(str, release))  # old PyTorch's misprint, decoded
    stalled = progress.since_progress_ms(observations)
    if stalled is not None:
        facts[progress.FACT] = stalled
    if culprit is not None:
        if culprit.ranks:
            facts["culprit_rank"] = culprit.ranks[0]
        if culprit.hosts:
            facts["culprit_host"] = culprit.hosts[0]
    return facts


__all__ = ["analyze"]
