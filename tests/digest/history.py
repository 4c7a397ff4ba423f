"""The store's seeded history (tests/store/seed.py) plus what only the digest shows: two `unknown`
diagnoses with unrecognised lines, and user corrections. Every figure the digest tests check follows
from these rows and NOW (Sunday 2026-11-29 12:00 UTC, ISO week 2026-W48).
"""

from __future__ import annotations

from bot.services.residue import CandidateLine, mine_lines
from bot.store import IncidentRecord, Store
from tests.store.diagnoses import make_diagnosis
from tests.store.seed import NOW, ago, seed_history

WEEK = "2026-W48"

METADATA_1 = "[rank0]: Failed to reach metadata service at 10.0.3.17:8500 from gpu-node-017 after 3 retries"
METADATA_2 = (
    "Failed to reach metadata service at 10.0.9.2:8500 from dgx-b200-04.cluster.local after 12 retries"
)
SHARD = "[rank3]: Checkpoint shard 0x7f3a2c00 checksum mismatch on rank 3"


def _line(raw: str, count: int = 1) -> CandidateLine:
    text = raw.split("]: ", 1)[-1]  # what prefix peeling leaves
    return CandidateLine(text=text, raw=raw, source="rank0.log", count=count)


# (key, host, days before NOW, unrecognised lines)
UNKNOWNS = [
    ("unknown-4", None, 4, [_line(METADATA_1, count=2), _line(SHARD)]),
    ("unknown-6", "gpu-node-021", 6, [_line(METADATA_2)]),
]

# (occurrence key whose incident was corrected, user, corrected class, note, days before NOW)
CORRECTIONS = [
    ("oom-1", "U0ALICE", "system/host-oom", "dmesg shows the cgroup OOM killer", 0.5),
    ("ib-5", "U0BOB", None, None, 3),
    ("oom-10", "U0CAROL", "hardware/gpu-xid", None, 9),  # the week before: not in this week's digest
]


def seed_digest_history(store: Store) -> dict[str, IncidentRecord]:
    records = seed_history(store)
    for key, host, days, lines in UNKNOWNS:
        diagnosis = make_diagnosis("unknown", host=host, signatures=(), text="")
        record = store.record_diagnosis(diagnosis, input_digest=key, cluster="west", now=ago(days))
        mine_lines(store, record.occurrence_id, lines, at=ago(days))
        records[key] = record
    for key, user, corrected, note, days in CORRECTIONS:
        store.record_feedback(
            records[key].id, user, correct=False, corrected_class=corrected, note=note, now=ago(days)
        )
    store.record_feedback(records["ib-9"].id, "U0DAVE", correct=True, now=ago(1))  # agreement: not shown
    return records


__all__ = ["NOW", "WEEK", "seed_digest_history"]
