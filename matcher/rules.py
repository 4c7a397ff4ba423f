"""The analysis rules (`rules.toml`) and the analysis version (`analysis-version.toml`), loaded once.

Like Sentry's grouping strategies, what produced a diagnosis is named: `ANALYSIS_VERSION` is the id of
the signature catalog plus these rules. The version file records a digest of both; `digest()` recomputes
it and a test fails when the data changed without a new version (id, base = the previous id, a changelog
line), so a tuning change is a reviewable diff and stored incidents say which rules grouped them.
"""

from __future__ import annotations

import functools
import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matcher.taxonomy import CLASSES

HERE = Path(__file__).resolve().parent
RULES_FILE = HERE / "rules.toml"
VERSION_FILE = HERE / "analysis-version.toml"
PRIORS_FILE = HERE / "priors.toml"
NEXT_CHECKS_FILE = HERE / "next_checks.toml"
# The analysis data besides the catalog: what a version id stands for along with the signatures.
DATA_FILES = (RULES_FILE, PRIORS_FILE, NEXT_CHECKS_FILE)
SIGNATURES = HERE / "signatures"


@dataclass(frozen=True, slots=True)
class Confidence:
    cascade_discount: float
    max_confidence: float
    unknown_alone: float
    echo_factor: float
    one_host_socket_factor: float
    several_hosts_local_factor: float
    roce_lead: float
    version_mismatch_mass: float
    exit_record_mass: float
    explained_peer_exit_factor: float
    stack_dump_mass: float
    collective_disagreement_mass: float


@dataclass(frozen=True, slots=True)
class Rules:
    confidence: Confidence
    xid_kinds: dict[int, str]  # xid -> application | memory | nvlink | bus | firmware
    echoes: dict[str, str]  # echo class -> the class whose report it repeats
    symptom_order: tuple[str, ...]
    never_named: frozenset[str]
    reporter_is_not_culprit: frozenset[str]
    waiting_reporters: frozenset[str]  # signature ids whose rank waited for the culprit
    collateral_exit_codes: frozenset[int]
    signal_classes: dict[str, str]  # SIGKILL -> system/host-oom
    signal_numbers: dict[str, int]  # SIGKILL -> 9
    signal_aliases: dict[str, str]  # "Segmentation fault" -> SIGSEGV
    exit_records: frozenset[str]  # signature ids of launcher exit records
    first_observed: frozenset[str]  # ... of those that name the first failure
    plain_exit_apart: frozenset[str]  # ... of launchers that report exceptions apart from exit codes
    teardown_classes: frozenset[str]  # classes whose lines echo a worker's death when written after it
    teardown_symptom: str
    cascade_exceptions: frozenset[str]
    phrases: dict[str, str]
    setting_classes: dict[str, str]  # NCCL_* name (without NCCL_) -> class when it differs across hosts
    setting_default_class: str
    setting_mass: float
    inter_node_classes: frozenset[str]  # discounted on one host (bare cascade evidence)
    intra_node_classes: frozenset[str]  # discounted on several hosts (bare cascade evidence)

    def application_xid(self, xid: object) -> bool:
        try:
            return self.xid_kinds.get(int(str(xid))) == "application"
        except ValueError:
            return False

    def signal_name(self, code: int) -> str | None:
        """-9 / 137 (128 + 9, a shell's way) -> SIGKILL; positive codes below 128 are plain exits."""
        if 0 <= code < 128:
            return None
        number = code - 128 if code > 128 else -code
        return next((name for name, n in self.signal_numbers.items() if n == number), None)

    def normal_signal(self, word: str) -> str | None:
        """ "SIGKILL", "KILL", "Killed", "Segmentation fault" -> the SIG name; None for anything else."""
        word = word.strip()
        name = self.signal_aliases.get(word) or word.upper()
        name = name if name.startswith("SIG") else "SIG" + name
        return name if name in self.signal_numbers else None


@dataclass(frozen=True, slots=True)
class AnalysisVersion:
    id: str
    base: str | None
    digest: str
    changelog: tuple[str, ...]


def _classes(values: list[str], where: str) -> frozenset[str]:
    unknown = [v for v in values if v not in CLASSES]
    if unknown:
        raise ValueError(f"{RULES_FILE.name}: {where} names unknown classes {unknown}")
    return frozenset(values)


def parse_rules(document: dict[str, Any]) -> Rules:
    xid_kinds = {int(x): kind for kind, xids in document["xids"].items() for x in xids}
    echoes = {e["echo"]: e["origin"] for e in document.get("echoes", [])}
    _classes([*echoes, *echoes.values()], "echoes")
    exits = document["exits"]
    _classes(list(exits["signal_classes"].values()), "exits.signal_classes")
    culprits = document["culprits"]
    phrases = dict(document["phrases"])
    _classes(list(phrases), "phrases")
    settings = document["settings"]
    _classes([*settings["classes"].values(), settings["default_class"]], "settings")
    if exits["teardown_symptom"] not in document["symptoms"]["order"]:
        raise ValueError(f"{RULES_FILE.name}: exits.teardown_symptom is not a symptom of symptoms.order")
    return Rules(
        confidence=Confidence(**document["confidence"]),
        xid_kinds=xid_kinds,
        echoes=echoes,
        symptom_order=tuple(document["symptoms"]["order"]),
        never_named=_classes(culprits["never_named"], "culprits.never_named"),
        reporter_is_not_culprit=_classes(
            culprits["reporter_is_not_culprit"], "culprits.reporter_is_not_culprit"
        ),
        waiting_reporters=frozenset(culprits["waiting_reporters"]),
        collateral_exit_codes=frozenset(int(c) for c in culprits["collateral_exit_codes"]),
        signal_classes=dict(exits["signal_classes"]),
        signal_numbers={k: int(v) for k, v in exits["signal_numbers"].items()},
        signal_aliases=dict(exits["signal_aliases"]),
        exit_records=frozenset(exits["records"]),
        first_observed=frozenset(exits["first_observed"]),
        plain_exit_apart=frozenset(exits["plain_exit_apart"]),
        teardown_classes=_classes(exits["teardown_classes"], "exits.teardown_classes"),
        teardown_symptom=str(exits["teardown_symptom"]),
        cascade_exceptions=frozenset(document["exceptions"]["cascade_types"]),
        phrases=phrases,
        setting_classes=dict(settings["classes"]),
        setting_default_class=settings["default_class"],
        setting_mass=float(settings["mass"]),
        inter_node_classes=_classes(document["hosts"]["inter_node_classes"], "hosts.inter_node_classes"),
        intra_node_classes=_classes(document["hosts"]["intra_node_classes"], "hosts.intra_node_classes"),
    )


@functools.cache
def rules() -> Rules:
    return parse_rules(tomllib.loads(RULES_FILE.read_text(encoding="utf-8")))


@functools.cache
def analysis_version() -> AnalysisVersion:
    document = tomllib.loads(VERSION_FILE.read_text(encoding="utf-8"))
    return AnalysisVersion(
        id=document["id"],
        base=document.get("base"),
        digest=document["digest"],
        changelog=tuple(document["changelog"]),
    )


def digest(signatures: Path = SIGNATURES, data_files: tuple[Path, ...] = DATA_FILES) -> str:
    """sha256 over the catalog files (by name, in order), the rules, the symptom-context priors and the
    next checks of guesses: what the version id stands for."""
    hasher = hashlib.sha256()
    for path in [*sorted(signatures.glob("*.toml")), *data_files]:
        hasher.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + hasher.hexdigest()


ANALYSIS_VERSION = analysis_version().id

__all__ = [
    "ANALYSIS_VERSION",
    "AnalysisVersion",
    "Rules",
    "analysis_version",
    "digest",
    "parse_rules",
    "rules",
]
