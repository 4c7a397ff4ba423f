"""Cross-rank analysis: observations (+ a Flight Recorder finding) -> ranked classes, symptom, culprit.

`analyze(scan, fr)` is a pure function. Root lines anywhere in the bundle decide the class; cascade lines
(what waiting or abandoned ranks say) only establish the symptom, and their own classes (peer exit) win
only when no root line exists. Without any root line the timeout family is split with context clues, the
cross-rank table and Flight Recorder (`matcher.analysis.timeouts`); a job that printed its NCCL setup and
then nothing gets `unknown` with ranked suggestions (`matcher.analysis.setup_hang`); versions that differ
across hosts support config/version-mismatch in every case (`matcher.analysis.versions`). A guess that
names fewer than three classes lists what an expert checks next (`matcher.analysis.next_checks`), after
the ranking is final and below every class in it. The culprit follows the rules of
`matcher.analysis.culprit`.

Facts: KNOWN_FIELDS values of the primary's evidence and the cross-rank table, job-wide versions and world
size, `culprit_rank` / `culprit_host`, and `since_progress_ms` (`matcher.analysis.progress`: milliseconds
from the last timestamped progress line to the first failure line after it, where both are known)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from matcher.analysis import (
    collectives,
    crossrank,
    exits,
    hostscope,
    next_checks,
    priors,
    progress,
    scoring,
    setup_hang,
    stacks,
    versions,
)
from matcher.analysis.crossrank import TableVerdict
from matcher.analysis.culprit import decide
from matcher.analysis.rankmap import RankMap, build_rank_map
from matcher.analysis.timeouts import ASYMMETRIC, RANK0, infer
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
from matcher.rules import rules
from matcher.taxonomy import CLASSES, UNKNOWN, title

MAX_CLASSES = 5
_CONTEXT_FACTS = ("nccl_version", "torch_version", "cuda_version", "driver_version", "world_size")
_TABLE_FACTS = ("seqnum", "optype", "pg", "timeout_ms", "numel_in")
# Per-class facts and weights (application Xids, echoes, symptom order, ...) live in matcher/rules.toml.
VERSION_CLASS = "config/version-mismatch"
# A bare ncclSystemError is read as a shared-memory segment that did not fit /dev/shm or a socket that
# cannot reach its peer; on one host (peers over loopback) the socket and IB readings are discounted, on a
# job provably spread over several hosts the host-local /dev/shm reading is.
# A retry timeout (status 12) right after init on RoCE devices, with no GID index chosen (or a different one
# per host): the maintainers' first answer is the GID index, ahead of the generic IB transport reading.
ROCE_CLASS = "network/roce-gid"
IB_CLASS = "network/ib-rdma"
PEER_EXIT = "network/peer-exit"
EXCEPTION_CLASS = "application/python-exception"
# Scheduler records that say the step was cancelled (time limit, scancel): its SIGKILLs are no OOM.
CANCELLED = frozenset({"slurm-step-cancelled"})
ROCE_LINK = "RoCE"  # the link layer NCCL prints after an IB device it uses


def analyze(scan: ScanResult, fr: FRFinding | None = None) -> Diagnosis:
    observations = list(scan.observations)
    rm = build_rank_map(observations, scan.sources)
    observations = _teardown_as_cascade(observations, rm)
    roots = scoring.by_class(observations, "root")
    cascades = [o for o in observations if o.role == "cascade"]
    table = crossrank.judge(observations, rm)

    masses: dict[str, float] = {}
    support: dict[str, list[Observation]] = {}
    extra_evidence: dict[str, tuple[Evidence, ...]] = {}
    after_init: setup_hang.Suggestions | None = None
    guessed = priors.Applied()
    stack = None if roots else stacks.finding(observations, rm)
    split = versions.differing_versions(observations, rm) or versions.build_newer_than_driver(observations)
    # NCCL_* settings or network plugins that differ between hosts: each points at its own class.
    settings_split = versions.differing_settings(observations, rm)
    # Processes whose COLL records name different collectives at one opCount issued different ones.
    disagreeing = collectives.disagreement(observations, rm)
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
            masses[cls] = rules().confidence.cascade_discount * scoring.mass(obs, rm)
            support[cls] = obs
        if hostscope.one_host(observations, rm):
            for cls in rules().inter_node_classes & masses.keys():
                masses[cls] *= rules().confidence.one_host_socket_factor
        elif hostscope.several_hosts(observations, rm):
            for cls in rules().intra_node_classes & masses.keys():
                masses[cls] *= rules().confidence.several_hosts_local_factor
        _recorded_death(observations, rm, masses, support)
        inference = infer(observations, cascades, table, fr, rm)
        for cls, amount in inference.masses.items():
            masses[cls] = masses.get(cls, 0.0) + amount
            support.setdefault(cls, []).extend(inference.evidence.get(cls, []))
        _raised_first(observations, rm, masses, support)
        if stack is not None:
            masses[stack.class_id] = masses.get(stack.class_id, 0.0) + rules().confidence.stack_dump_mass
            support.setdefault(stack.class_id, [])[:0] = list(stack.evidence)
        silent = setup_hang.silent(cascades, table, fr)
        suggestions = setup_hang.suggest(observations, rm) if silent else None
        if suggestions is not None:
            after_init = suggestions
            for cls, amount in suggestions.masses.items():
                masses[cls] = masses.get(cls, 0.0) + amount
                support.setdefault(cls, []).extend(suggestions.evidence.get(cls, []))
            guessed.added.update({c: m for c, m in suggestions.masses.items() if c != UNKNOWN})
            priors.demote_unknown(masses)
        elif not (split or settings_split or disagreeing) and priors.bare(
            observations, table, fr.kind if fr is not None else None, rm
        ):
            # No line names a cause: what resolved threads of the same symptom context turned out to be.
            context = priors.context_of(observations, _symptom(cascades, fr), table, rm)
            guessed = priors.apply(context, masses, support, cascades)
    if split:
        masses[VERSION_CLASS] = masses.get(VERSION_CLASS, 0.0) + rules().confidence.version_mismatch_mass
        support.setdefault(VERSION_CLASS, []).extend(split)
    if disagreeing:
        masses[ASYMMETRIC] = masses.get(ASYMMETRIC, 0.0) + rules().confidence.collective_disagreement_mass
        support.setdefault(ASYMMETRIC, []).extend(disagreeing)
    for cls, differing in settings_split.items():
        masses[cls] = masses.get(cls, 0.0) + rules().setting_mass
        support.setdefault(cls, []).extend(differing)
    if fr is not None and fr.evidence:
        for cls in masses:
            if cls.startswith("timeout/") or cls == UNKNOWN:
                extra_evidence[cls] = fr.evidence[:1]

    pinned = [o for o in table.evidence if rm.rank(o) in table.culprits]
    ranked = _rank(masses, support, cascades, extra_evidence, pinned, guessed.guessed(masses))
    # A guess naming fewer than three classes lists what an expert checks next, below everything else.
    ranked = next_checks.fill(ranked, MAX_CLASSES)
    primary = ranked[0].class_id
    rank0_clue = next((o for o in support.get(RANK0, []) if o.role == "context"), None)
    decision = decide(
        primary, roots.get(primary, []), cascades, observations, table, fr, rm, rank0_clue, stack
    )
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


def _teardown_as_cascade(observations: list[Observation], rm: RankMap) -> list[Observation]:
    """Rendezvous failures written while the job was torn down after a worker's death echo that death:
    they keep their symptom (the store was lost) but support no class of their own."""
    echoes = exits.teardown_echoes(observations, rm)
    if not echoes:
        return observations
    symptom = rules().teardown_symptom
    return [
        replace(o, role="cascade", symptom=symptom, classes=()) if i in echoes else o
        for i, o in enumerate(observations)
    ]


def _recorded_death(
    observations: list[Observation],
    rm: RankMap,
    masses: dict[str, float],
    support: dict[str, list[Observation]],
) -> None:
    """A launcher recorded the first worker's death by a signal that names a class (SIGKILL: the host OOM
    killer): that record is the root the survivors' peer-exit reports echo. A step the scheduler
    cancelled before the death was killed by it, not by the kernel; one cancelled after it is srun
    stopping the rest (`--kill-on-bad-exit`)."""
    death = exits.first_failure(observations, rm)
    killed_as = exits.signal_class(death)
    if death is None or killed_as is None:
        return
    if any(o.signature in CANCELLED and not _after(o, death.obs, death.time) for o in observations):
        return
    weights = rules().confidence
    masses[killed_as] = masses.get(killed_as, 0.0) + weights.exit_record_mass
    support.setdefault(killed_as, []).insert(0, death.obs)
    if PEER_EXIT in masses:
        masses[PEER_EXIT] *= weights.explained_peer_exit_factor


def _after(obs: Observation, event: Observation, event_time: float | None) -> bool:
    """Whether `obs` was written after `event`: further down the same file, else later by the clock;
    False when nothing tells."""
    if obs.line.source == event.line.source:
        return obs.line.lineno > event.line.lineno
    return obs.line.time is not None and event_time is not None and obs.line.time > event_time


def _raised_first(
    observations: list[Observation],
    rm: RankMap,
    masses: dict[str, float],
    support: dict[str, list[Observation]],
) -> None:
    """An ordinary Python exception on one rank came first: the others' timeouts and lost peers are its
    echo, not a straggler or a network fault."""
    raised = exits.first_exception(observations, rm)
    if raised is None or exits.signal_class(exits.first_failure(observations, rm)) is not None:
        return
    weights = rules().confidence
    for cls in list(masses):
        if cls.startswith("timeout/") or cls == PEER_EXIT:
            masses[cls] *= weights.explained_peer_exit_factor
    masses[EXCEPTION_CLASS] = masses.get(EXCEPTION_CLASS, 0.0) + weights.exit_record_mass
    support.setdefault(EXCEPTION_CLASS, []).insert(0, raised.obs)


def _demote_application_xids(roots: dict[str, list[Observation]], masses: dict[str, float]) -> None:
    xid_obs = roots.get("hardware/gpu-xid", [])
    application = all(rules().application_xid(o.fields.get("xid")) for o in xid_obs)
    if xid_obs and "cuda/illegal-access" in masses and application:
        masses["hardware/gpu-xid"] *= rules().confidence.echo_factor


def _demote_echoes(roots: dict[str, list[Observation]], masses: dict[str, float]) -> None:
    for echo, origin in rules().echoes.items():
        if echo not in masses or origin not in roots:
            continue
        first = min(roots[origin], key=scoring.chronological_key)
        if all(_follows(o, first) for o in roots[echo]):
            masses[echo] *= rules().confidence.echo_factor


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
    masses[ROCE_CLASS] = max(masses[ROCE_CLASS], masses[IB_CLASS]) + rules().confidence.roce_lead


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
    guessed: frozenset[str] = frozenset(),
) -> tuple[ClassScore, ...]:
    known = {c: m for c, m in masses.items() if m > 0 and c in CLASSES}
    if not known or set(known) == {UNKNOWN}:
        evidence = scoring.excerpts(cascades)
        return (ClassScore(UNKNOWN, rules().confidence.unknown_alone, title(UNKNOWN), evidence),)
    conf = scoring.confidences(known)
    for cls in guessed & set(conf):  # a prior's guess, nothing in the bundle behind it: say so
        conf[cls] = min(conf[cls], priors.priors().max_confidence)
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
    order = rules().symptom_order
    if seen:
        return min(seen, key=lambda s: (order.index(s) if s in order else len(order), -seen[s]))
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
