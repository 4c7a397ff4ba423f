"""Container and log-shipper formats: JSON-lines records (docker json-file, shippers, journal export), CRI
stream tags and `kubectl logs --prefix` are read like the plain lines they wrap."""

from __future__ import annotations

import json
from pathlib import Path

from matcher.reading.containers import unwrap
from tests.matcher.excerpts import class_ids, diagnose_text

OOM = (
    "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total "
    "capacity of 79.15 GiB of which 1.12 GiB is free."
)
TIMEOUT = (
    "[rank{r}]:[E1129 03:11:40.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
    "ran for 600083 milliseconds before timing out."
)
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=30412, name=python, GPU has fallen off the bus."


def _docker(message: str, time: str) -> str:
    return json.dumps({"log": message + "\n", "stream": "stderr", "time": time}) + "\n"


def test_docker_json_lines_name_the_rank_tagged_inside_the_record(tmp_path: Path) -> None:
    text = _docker(TIMEOUT.format(r=0), "2025-01-01T10:10:00.5Z") + _docker(OOM, "2025-01-01T10:00:00.1Z")
    d = diagnose_text(tmp_path, text, name="trainer-0.log")
    assert d.primary.class_id == "cuda/oom"
    assert d.culprit is not None and d.culprit.ranks == (2,)
    assert d.primary.evidence[0].text.startswith("[rank2]: torch.OutOfMemoryError")  # no JSON around it


def test_cri_stream_tags_are_peeled_so_the_rank_tag_counts(tmp_path: Path) -> None:
    text = (
        f"2025-01-01T10:00:00.123456789Z stderr F {OOM}\n"
        f"2025-01-01T10:10:00.1Z stderr F {TIMEOUT.format(r=1)}\n"
    )
    d = diagnose_text(tmp_path, text)
    assert d.primary.class_id == "cuda/oom"
    assert d.culprit is not None and d.culprit.ranks == (2,)


def test_kubectl_prefix_names_the_pod_as_the_host(tmp_path: Path) -> None:
    d = diagnose_text(tmp_path, f"[pod/trainer-worker-3/pytorch] {XID}\n")
    assert d.primary.class_id == "hardware/gpu-xid"
    assert d.culprit is not None and d.culprit.hosts == ("trainer-worker-3",)


def test_a_journal_json_export_gives_the_host_and_time(tmp_path: Path) -> None:
    record = {"MESSAGE": XID, "_HOSTNAME": "gpu-node-017", "__REALTIME_TIMESTAMP": "1735725600000000"}
    d = diagnose_text(tmp_path, json.dumps(record) + "\n")
    assert d.primary.class_id == "hardware/gpu-xid"
    assert d.culprit is not None and d.culprit.hosts == ("gpu-node-017",)


def test_a_shipper_record_with_kubernetes_metadata_names_the_pod(tmp_path: Path) -> None:
    record = {"message": XID, "@timestamp": "2025-01-01T10:00:00Z", "kubernetes": {"pod_name": "ft-w-2"}}
    d = diagnose_text(tmp_path, json.dumps(record) + "\n")
    assert d.culprit is not None and d.culprit.hosts == ("ft-w-2",)


def test_json_that_is_no_log_record_stays_a_plain_line(tmp_path: Path) -> None:
    assert unwrap('{"loss": 0.12, "step": 40}') is None
    assert unwrap("{not json at all}") is None
    assert unwrap('["log", "x"]') is None
    d = diagnose_text(tmp_path, '{"loss": 0.12, "step": 40}\n' + OOM + "\n")
    assert class_ids(d)[0] == "cuda/oom"


def test_record_times_read_as_utc_epochs() -> None:
    record = unwrap(json.dumps({"log": "x\n", "time": "2025-01-01T00:00:01.250Z"}))
    assert record is not None and record.text == "x"
    assert record.time == 1735689601.25
    millis = unwrap(json.dumps({"msg": "y", "ts": 1735689601250}))
    assert millis is not None and millis.time == 1735689601.25
