"""Mining the residue into templates with Drain3, its state in the store."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from bot.services.residue import CandidateLine, list_templates, mine_lines
from bot.services.residue.miner import MINER_NAME, templates
from bot.store import Store
from tests.store.diagnoses import make_diagnosis

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def occurrence(store: Store, key: str) -> int:
    diagnosis = make_diagnosis("unknown", host=None, signatures=(), text="")
    return store.record_diagnosis(diagnosis, input_digest=key, now=NOW).occurrence_id


def lines(*texts: str) -> list[CandidateLine]:
    return [CandidateLine(text=t, raw=f"[rank0]: {t}", source="rank0.log") for t in texts]


def grouped(store: Store) -> dict[str, int]:
    return {t.template: t.lines for t in list_templates(store, days=7, now=NOW)}


def test_lines_that_differ_only_in_numbers_hosts_and_addresses_share_a_template(store: Store) -> None:
    mine_lines(
        store,
        occurrence(store, "a"),
        lines(
            "Failed to reach metadata service at 10.0.3.17:8500 from gpu-node-017 after 3 retries",
            "Failed to reach metadata service at 10.0.9.2:8500 from dgx-b200-04.cluster.local"
            " after 12 retries",
            "Failed to reach metadata service at fe80::1a2b:3c4d from ip-10-0-3-17 after 7 retries",
            "Checkpoint shard 0x7f3a2c00 checksum mismatch on rank 3",
            "Checkpoint shard 0x1b00 checksum mismatch on rank 12",
            "job 123e4567-e89b-12d3-a456-426614174000 lost its lease",
            "job 9f1c2d3e-0000-4abc-8def-0123456789ab lost its lease",
            "Metadata token refused by the service",
        ),
        at=NOW,
    )
    assert grouped(store) == {
        "Failed to reach metadata service at <IP> from <HOST> after <NUM> retries": 3,
        "Checkpoint shard <HEX> checksum mismatch on rank <NUM>": 2,
        "job <UUID> lost its lease": 2,
        "Metadata token refused by the service": 1,
    }


def test_template_ids_survive_a_restart_and_replicas_share_them(database_url: str) -> None:
    with Store.open(database_url) as first:
        mine_lines(
            first, occurrence(first, "a"), lines("NVMe scratch full on node-3, writes failing"), at=NOW
        )
        [before] = list_templates(first, days=7, now=NOW)
    with Store.open(database_url) as restarted:
        mine_lines(
            restarted,
            occurrence(restarted, "b"),
            lines("NVMe scratch full on node-44, writes failing"),
            at=NOW,
        )
        [after] = list_templates(restarted, days=7, now=NOW)
    assert after.id == before.id
    assert (after.occurrences, after.lines) == (2, 2)


def test_the_same_diagnosis_mined_twice_counts_once(store: Store) -> None:
    target = occurrence(store, "a")
    for _ in range(2):
        mine_lines(store, target, lines("Lustre OST0003 unreachable, retrying"), at=NOW)
    [template] = list_templates(store, days=7, now=NOW)
    assert (template.occurrences, template.lines) == (1, 1)


def test_concurrent_miners_lose_no_template(database_url: str) -> None:
    """Each miner reads, extends and writes back the one stored tree: under the store's lock neither
    overwrites the other's templates."""
    with Store.open(database_url) as store:
        ids = [occurrence(store, f"occ-{i}") for i in range(4)]
    texts = [
        "Lustre OST0003 unreachable, retrying",
        "NVMe scratch full on node-3, writes failing",
        "PMIx server died before the job finished",
        "Container runtime killed the sidecar: liveness probe failed",
    ]
    barrier = threading.Barrier(len(ids))
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            with Store.open(database_url) as own:
                barrier.wait(timeout=10)
                mine_lines(own, ids[index], lines(texts[index]), at=NOW)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(ids))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    with Store.open(database_url) as store:
        assert sorted(templates(store.miner_state(MINER_NAME)).values()) == sorted(
            [
                "Lustre OST<NUM> unreachable, retrying",
                "NVMe scratch full on <HOST>, writes failing",
                "PMIx server died before the job finished",
                "Container runtime killed the sidecar: liveness probe failed",
            ]
        )
        assert len(list_templates(store, days=7, now=NOW)) == 4
