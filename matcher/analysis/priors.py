"""Class priors for symptom contexts (`matcher/priors.toml`): a ranked guess when no line names a cause.

A bare watchdog timeout, a lone ncclRemoteError, a worker that died by SIGABRT: the logs say what broke,
not why. Rather than answering `unknown` while the bundle carries a recognisable symptom, the analysis
asks which context the symptom sits in (which collective, how early, which timeout, which NCCL result,
one host or several) and adds the masses resolved threads of that context support. The first context
whose conditions hold applies. Its classes are guesses: they are capped at a low confidence and never
name a culprit (`matcher.analysis.culprit` only names one from evidence).
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from matcher.analysis import exits
from matcher.analysis.crossrank import TableVerdict
from matcher.analysis.hostscope import one_host, several_hosts
from matcher.analysis.rankmap import RankMap, as_int
from matcher.model import Observation
from matcher.rules import PRIORS_FILE
from matcher.taxonomy import CLASSES, UNKNOWN

_SMALL_BROADCAST_NUMEL = 1024
KILLED = "sigkill"  # the cascade symptom of a worker killed by SIGKILL
_CONDITIONS = frozenset(
    {
        "symptom",
        "signatures",
        "without",
        "seqnum_max",
        "seqnum_min",
        "no_seqnum",
        "barrier_like",
        "timeout_ms_min",
        "hosts",
        "error",
        "exit_signal",
        "classless",
        "joined_over_world",
    }
)


@dataclass(frozen=True, slots=True)
class Context:
    """What a bundle without a root line shows about its failure."""

    symptom: str  # the cascade symptom, "none" without one
    signatures: frozenset[str]
    seqnum: int | None
    sync_point: bool  # barrier, 1-element allreduce, small broadcast
    timeout_ms: int | None
    one_host: bool  # provably one host (matcher.analysis.hostscope)
    several_hosts: bool  # provably several: more than one host named, inter-node transports, > 8 ranks
    errors: tuple[str, ...]  # NCCL results PyTorch surfaced ("internal error", "ncclInvalidUsage")
    exit_signal: str | None  # how the first recorded worker death happened
    named_classes: frozenset[str] = frozenset()  # classes any line names (a cascade line's peer exit, ...)
    # A store barrier counted more ranks than the world size (`task` joined > `world_size`): another job
    # or a restarted one shares the store, whatever else the paste lacks.
    joined_over_world: bool = False


@dataclass(frozen=True, slots=True)
class Prior:
    id: str
    description: str
    when: dict[str, Any]
    classes: dict[str, float]
    keep_unknown: bool = False

    def holds(self, ctx: Context) -> bool:
        w = self.when
        checks = (
            "symptom" not in w or ctx.symptom in w["symptom"],
            "signatures" not in w or bool(ctx.signatures & set(w["signatures"])),
            "without" not in w or not ctx.signatures & set(w["without"]),
            "seqnum_max" not in w or (ctx.seqnum is not None and ctx.seqnum <= w["seqnum_max"]),
            "seqnum_min" not in w or (ctx.seqnum is not None and ctx.seqnum >= w["seqnum_min"]),
            "no_seqnum" not in w or (ctx.seqnum is None) == w["no_seqnum"],
            "barrier_like" not in w or ctx.sync_point == w["barrier_like"],
            "timeout_ms_min" not in w or (ctx.timeout_ms or 0) >= w["timeout_ms_min"],
            "hosts" not in w or _hosts_hold(w["hosts"], ctx),
            "error" not in w or any(e.lower() in got.lower() for e in w["error"] for got in ctx.errors),
            "exit_signal" not in w or ctx.exit_signal in w["exit_signal"],
            "classless" not in w or (not ctx.named_classes) == w["classless"],
            "joined_over_world" not in w or ctx.joined_over_world == w["joined_over_world"],
        )
        return all(checks)


def _hosts_hold(wanted: str, ctx: Context) -> bool:
    return {
        "one": ctx.one_host,
        "several": ctx.several_hosts,
        "not-one": not ctx.one_host,
        "not-several": not ctx.several_hosts,
    }[wanted]


@dataclass(frozen=True, slots=True)
class Priors:
    max_confidence: float
    unknown_share: float
    hang_after_init_unknown: float
    contexts: tuple[Prior, ...]
    # Signatures saying in words that a job hung after training started: not a hang at NCCL setup.
    hang_stages_after_setup: frozenset[str] = frozenset()

    def first(self, ctx: Context) -> Prior | None:
        return next((p for p in self.contexts if p.holds(ctx)), None)


@dataclass(slots=True)
class Applied:
    """Which prior applied and the masses it added (to cap the classes that rest on it alone)."""

    prior: Prior | None = None
    added: dict[str, float] = field(default_factory=dict)

    def guessed(self, masses: dict[str, float], margin: float = 0.05) -> frozenset[str]:
        """Classes whose mass is (nearly) all the prior's: nothing in the bundle backs them."""
        return frozenset(c for c, m in self.added.items() if masses.get(c, 0.0) - m < margin)


def parse_priors(document: dict[str, Any]) -> Priors:
    settings = document["settings"]
    contexts = []
    seen: set[str] = set()
    for entry in document.get("context", []):
        prior = Prior(
            id=entry["id"],
            description=entry["description"],
            when=dict(entry["when"]),
            classes={c: float(m) for c, m in entry["classes"].items()},
            keep_unknown=bool(entry.get("keep_unknown", False)),
        )
        unknown_keys = set(prior.when) - _CONDITIONS
        if prior.when.get("hosts", "one") not in ("one", "several", "not-one", "not-several"):
            unknown_keys.add(f"hosts={prior.when['hosts']}")
        bad_classes = [c for c in prior.classes if c not in CLASSES or c == UNKNOWN]
        if prior.id in seen or unknown_keys or bad_classes or not (prior.classes or prior.keep_unknown):
            raise ValueError(
                f"{PRIORS_FILE.name}: context {prior.id!r}: duplicate id, unknown conditions "
                f"{sorted(unknown_keys)} or unknown classes {bad_classes}"
            )
        seen.add(prior.id)
        contexts.append(prior)
    return Priors(
        max_confidence=float(settings["max_confidence"]),
        unknown_share=float(settings["unknown_share"]),
        hang_after_init_unknown=float(settings["hang_after_init_unknown"]),
        contexts=tuple(contexts),
        hang_stages_after_setup=frozenset(settings.get("hang_stages_after_setup", ())),
    )


@functools.cache
def priors() -> Priors:
    return parse_priors(tomllib.loads(PRIORS_FILE.read_text(encoding="utf-8")))


def _sync_point(table: TableVerdict) -> bool:
    op = (table.optype or "").upper()
    small = table.numel_in is not None and table.numel_in <= 1
    if op == "BARRIER" or (op == "ALLREDUCE" and small):
        return True
    return op == "BROADCAST" and (table.numel_in is None or table.numel_in <= _SMALL_BROADCAST_NUMEL)


def context_of(
    observations: list[Observation], symptom: str | None, table: TableVerdict, rm: RankMap
) -> Context:
    death = exits.first_failure(observations, rm)
    errors = tuple(str(o.fields["error_code"]) for o in observations if "error_code" in o.fields)
    return Context(
        symptom=symptom or "none",
        signatures=frozenset(o.signature for o in observations),
        seqnum=table.seqnum,
        sync_point=_sync_point(table),
        timeout_ms=table.timeout_ms,
        one_host=one_host(observations, rm),
        several_hosts=several_hosts(observations, rm),
        errors=errors,
        exit_signal=death.signal if death is not None else None,
        named_classes=frozenset(c for o in observations for c in o.classes),
        joined_over_world=any(_joined_over_world(o) for o in observations),
    )


def _joined_over_world(obs: Observation) -> bool:
    joined, world = as_int(obs.fields.get("task")), as_int(obs.fields.get("world_size"))
    return joined is not None and world is not None and joined > world


def bare(
    observations: list[Observation],
    table: TableVerdict,
    fr_kind: str | None,
    rm: RankMap,
) -> bool:
    """Nothing but symptom lines: no clue line for any class, no cross-rank table verdict or Flight
    Recorder finding, no worker death whose signal names a class (a SIGKILL is the OOM killer's)."""
    if table.kind != "none" or fr_kind not in (None, "no-issue"):
        return False
    if any(o.role == "context" and o.classes for o in observations):
        return False
    if any(o.symptom == KILLED for o in observations):
        return False
    return exits.signal_class(exits.first_failure(observations, rm)) is None


def apply(
    ctx: Context,
    masses: dict[str, float],
    support: dict[str, list[Observation]],
    evidence: Iterable[Observation],
) -> Applied:
    """Add the first matching context's masses; keep `unknown` below the best guess, or above it where the
    context says `keep_unknown`. `evidence` (the symptom's own lines) backs the guessed classes."""
    prior = priors().first(ctx)
    if prior is None:
        return Applied()
    shown = list(evidence)
    applied = Applied(prior=prior)
    for cls, amount in prior.classes.items():
        masses[cls] = masses.get(cls, 0.0) + amount
        applied.added[cls] = amount
        support.setdefault(cls, []).extend(o for o in shown if o not in support.get(cls, []))
    if prior.keep_unknown:
        keep_unknown_first(masses, prior.classes)
    else:
        demote_unknown(masses)
    return applied


def keep_unknown_first(masses: dict[str, float], guesses: Iterable[str]) -> None:
    """A context too spread to guess: `unknown` stays ahead of the classes it guessed, which keep at most
    `unknown_share` of its mass (the mirror of `demote_unknown`). What the bundle's own analysis weighed
    (a timeout's clues) is left as it is."""
    best = max((masses.get(c, 0.0) for c in guesses if c != UNKNOWN), default=0.0)
    if best > 0:
        masses[UNKNOWN] = max(masses.get(UNKNOWN, 0.0), best / priors().unknown_share)


def demote_unknown(masses: dict[str, float]) -> None:
    """Keep `unknown` below the best guess (at `unknown_share` of its mass): listed, not leading."""
    best = max((m for c, m in masses.items() if c != UNKNOWN), default=0.0)
    if UNKNOWN in masses and best > 0:
        masses[UNKNOWN] = min(masses[UNKNOWN], priors().unknown_share * best)


__all__ = [
    "Applied",
    "Context",
    "Prior",
    "Priors",
    "apply",
    "bare",
    "context_of",
    "demote_unknown",
    "keep_unknown_first",
    "parse_priors",
    "priors",
]
