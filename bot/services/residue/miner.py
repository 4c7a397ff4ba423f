"""Drain3 (a streaming log-template miner) over the residue lines, its state kept in the store.

`StorePersistence` is Drain3's PersistenceHandler backed by `bot.store`'s miner state: every replica
mines into the one tree in the database, and template ids stay stable across restarts, so counts kept
per template id (`residue_samples`) keep meaning the same template. The state is Drain3's jsonpickle
snapshot; it is only ever written by this module into our own database, which is trusted like the rest
of the store.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path

from drain3 import TemplateMiner
from drain3.masking import MaskingInstruction
from drain3.persistence_handler import PersistenceHandler
from drain3.template_miner_config import TemplateMinerConfig

from bot.services.residue.collect import CandidateLine
from bot.store.residue import ResidueWriter, TemplateLines

# The name of the state in the store. A change of masks or Drain parameters that would regroup lines
# gets a new name (and so a fresh tree), so old template ids never silently change meaning.
MINER_NAME = "residue-v1"
MASKS_FILE = Path(__file__).with_name("masks.toml")

# Drain's defaults, but with a bounded number of templates (least recently used ones are dropped), so
# the state stays small whatever the logs.
SIMILARITY = 0.4
DEPTH = 4
MAX_TEMPLATES = 2000


@dataclass(frozen=True, slots=True)
class Mask:
    name: str
    pattern: str
    in_signature: str


@cache
def masks() -> tuple[Mask, ...]:
    with MASKS_FILE.open("rb") as file:
        return tuple(Mask(m["name"], m["pattern"], m["in_signature"]) for m in tomllib.load(file)["mask"])


def miner_config() -> TemplateMinerConfig:
    config = TemplateMinerConfig()
    config.drain_sim_th = SIMILARITY
    config.drain_depth = DEPTH
    config.drain_max_clusters = MAX_TEMPLATES
    config.masking_instructions = [MaskingInstruction(m.pattern, m.name) for m in masks()]
    config.mask_prefix, config.mask_suffix = "<", ">"
    config.snapshot_compress_state = True
    return config


class StorePersistence(PersistenceHandler):
    """Loads the state the store holds and writes snapshots back through the caller's transaction."""

    def __init__(self, writer: ResidueWriter, at: datetime) -> None:
        self._writer = writer
        self._at = at

    def load_state(self) -> bytes | None:
        return self._writer.state()

    def save_state(self, state: bytes) -> None:
        self._writer.save_state(state, self._at)


class SnapshotPersistence(PersistenceHandler):
    """A read-only view of a stored state (for listing templates)."""

    def __init__(self, state: bytes | None) -> None:
        self._state = state

    def load_state(self) -> bytes | None:
        return self._state

    def save_state(self, state: bytes) -> None:
        raise RuntimeError("a snapshot is read-only")


def mine(writer: ResidueWriter, lines: Sequence[CandidateLine], at: datetime) -> list[TemplateLines]:
    """Add `lines` to the stored tree; returns what they contributed per template."""
    persistence = StorePersistence(writer, at)
    miner = TemplateMiner(persistence, miner_config())  # loads the stored state
    # Drain3 snapshots the whole tree after every new or changed template; one snapshot per batch is
    # enough, so the handler is detached while adding and the batch saved once at the end.
    miner.persistence_handler = None
    per_template: dict[int, list[int | str]] = {}
    for line in lines:
        cluster_id = int(miner.add_log_message(line.text)["cluster_id"])
        entry = per_template.setdefault(cluster_id, [0, line.raw or line.text])
        entry[0] = int(entry[0]) + line.count
    miner.persistence_handler = persistence
    if lines:
        miner.save_state(f"{len(lines)} residue lines")
    return [
        TemplateLines(template_id=cluster_id, lines=int(count), example=str(example))
        for cluster_id, (count, example) in sorted(per_template.items())
    ]


def templates(state: bytes | None) -> dict[int, str]:
    """Template text per id of a stored state."""
    if state is None:
        return {}
    miner = TemplateMiner(SnapshotPersistence(state), miner_config())
    return {cluster.cluster_id: cluster.get_template() for cluster in miner.drain.clusters}
