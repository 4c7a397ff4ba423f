"""No lost updates: processes recording the same fingerprints at the same moment end in one incident
per fingerprint whose count is the number of processes."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier

from bot.store import Store
from tests.store.conftest import T0
from tests.store.diagnoses import make_diagnosis

WRITERS = 8
# Several fingerprints in a row, each written by every process: more chances for the race to show.
# No culprit host: creating a node row would itself serialise the writers and hide a missing lock.
SIGNATURES = [f"barrier-timeout-{n}" for n in range(10)]


def _record(url: str, barrier: Barrier, index: int) -> None:
    with Store.open(url) as store:
        barrier.wait(timeout=60)
        for signature in SIGNATURES:
            diagnosis = make_diagnosis("timeout/rank0-only-work", host=None, signatures=(signature,))
            store.record_diagnosis(diagnosis, job_id=f"job-{index}", input_digest=signature, now=T0)


def test_eight_writers_one_incident_per_fingerprint_count_eight(database_url: str) -> None:
    Store.open(database_url).close()  # migrate first; the race under test is the recording
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(WRITERS)
    processes = [context.Process(target=_record, args=(database_url, barrier, i)) for i in range(WRITERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * WRITERS
    with Store.open(database_url) as store:
        incidents = store.incidents()
        assert [i.occurrences for i in incidents] == [WRITERS] * len(SIGNATURES)
        assert len(store.history(days=1, now=T0)) == WRITERS * len(SIGNATURES)
