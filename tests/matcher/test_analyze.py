"""analyze(): root beats cascade, the cross-rank table finds laggards, culprits only where the logs allow."""

from __future__ import annotations

from typing import Any

from matcher.analysis.analyze import analyze
from matcher.model import KNOWN_FIELDS, FRFinding, Line, Observation, Role, ScanResult, SourceSummary, Stats

T0 = 1_764_400_000.0  # an epoch second; lines below are offsets from it


def obs(
    signature: str,
    role: Role,
    classes: tuple[str, ...] = (),
    *,
    rank: int | None = None,
    host: str | None = None,
    t: float | None = None,
    lineno: int = 1,
    symptom: str | None = None,
    weight: float = 1.0,
    source: str | None = None,
    text: str | None = None,
    **fields: Any,
) -> Observation:
    line = Line(
        source=source or (f"attempt_0/{rank}/stderr.log" if rank is not None else "job.log"),
        lineno=lineno,
        text=text or f"{signature} line",
        rank=rank,
        host=host,
        time=None if t is None else T0 + t,
    )
    return Observation(signature, classes, role, line, fields, weight, symptom)


def timeout(
    rank: int, seq: int = 42, op: str = "ALLREDUCE", numel: int = 1048576, t: float = 1800.0, **kw: Any
):
    return obs(
        "watchdog-timeout",
        "cascade",
        rank=rank,
        t=t + rank * 0.01,
        symptom="collective-timeout",
        seqnum=seq,
        optype=op,
        numel_in=numel,
        timeout_ms=kw.pop("timeout_ms", 600000),
        pg_rank=rank,
        **kw,
    )


def summary(rank: int, seq: int, enqueued: int, completed: int) -> Observation:
    return obs(
        "watchdog-failure-summary",
        "cascade",
        rank=rank,
        lineno=2,
        symptom="collective-timeout",
        seqnum=seq,
        last_enqueued=enqueued,
        last_completed=completed,
        pg="0",
    )


def init(rank: int, host: str, device: int, world: int) -> Observation:
    """An NCCL init context line: the rank -> host -> GPU mapping (no [rankN] prefix on NCCL lines)."""
    line = Line(source="job.log", lineno=rank + 1, text="Init COMPLETE", host=host, pid=1000 + rank)
    return Observation(
        "nccl-init-rank",
        (),
        "context",
        line,
        {"rank": rank, "host": host, "device": device, "world_size": world},
    )


def scan(*observations: Observation, ranks: int | None = None) -> ScanResult:
    sources = tuple(
        SourceSummary(name=f"attempt_0/{r}/stderr.log", rank=r, host=None, lines=100, bytes=1000)
        for r in range(ranks or 0)
    )
    return ScanResult(tuple(observations), sources, Stats(bytes=1000, lines=100))


def assert_ranked(diagnosis) -> None:
    confs = [d.confidence for d in diagnosis.diagnoses]
    assert confs == sorted(confs, reverse=True)
    assert all(0.0 <= c <= 1.0 for c in confs)
    assert 1 <= len(diagnosis.diagnoses) <= 5


def test_oom_on_one_rank_outranks_timeouts_everywhere_else() -> None:
    world = 8
    observations = [init(r, f"gpu-node-{r // 4:03d}", r % 4, world) for r in range(world)]
    observations.append(obs("cuda-oom", "root", ("cuda/oom",), rank=5, t=1759.0, weight=1.5))
    observations += [timeout(r) for r in range(world) if r != 5]
    d = analyze(scan(*observations))
    assert_ranked(d)
    assert d.primary.class_id == "cuda/oom"
    assert d.primary.confidence >= 0.7
    assert d.symptom == "collective-timeout"
    assert d.culprit is not None and d.culprit.ranks == (5,)
    assert d.culprit.hosts == ("gpu-node-001",)
    assert "41 s before" in d.culprit.reason
    assert d.facts["culprit_rank"] == 5
    assert d.primary.evidence[0].signature == "cuda-oom"


def test_same_error_on_every_rank_at_once_names_nobody() -> None:
    world = 4
    observations = [obs("cuda-oom", "root", ("cuda/oom",), rank=r, t=10.0) for r in range(world)]
    d = analyze(scan(*observations, ranks=world))
    assert d.primary.class_id == "cuda/oom"
    assert d.culprit is None
    assert "same time" in (d.no_culprit_reason or "")


def test_same_error_on_every_rank_names_the_first_in_time() -> None:
    observations = [
        obs("cuda-oom", "root", ("cuda/oom",), rank=r, t=10.0 + (30 if r != 2 else 0)) for r in range(4)
    ]
    d = analyze(scan(*observations, ranks=4))
    assert d.culprit is not None and d.culprit.ranks == (2,)


def test_lagging_rank_in_the_watchdog_summary_is_the_culprit() -> None:
    world = 8
    observations = [timeout(r) for r in range(world) if r != 3]
    observations += [summary(r, 42, 42, 41) for r in range(world) if r != 3]
    observations.append(summary(3, 41, 41, 41))
    d = analyze(scan(*observations, ranks=world))
    assert_ranked(d)
    assert d.primary.class_id == "timeout/straggler-input"
    assert 0.35 <= d.primary.confidence <= 0.8
    assert d.culprit is not None and d.culprit.ranks == (3,)
    assert d.primary.evidence[0].source == "attempt_0/3/stderr.log"  # the laggard's own report leads
    assert d.facts["seqnum"] == 42
    assert d.facts["optype"] == "ALLREDUCE"


def test_rank_that_logs_no_timeout_while_its_peers_do_is_the_culprit() -> None:
    world = 8
    observations = [timeout(r) for r in range(world) if r != 6]
    d = analyze(scan(*observations, ranks=world))
    assert d.culprit is not None and d.culprit.ranks == (6,)
    assert d.primary.class_id == "timeout/straggler-input"


def test_different_optype_at_one_seqnum_is_asymmetric_with_the_odd_rank() -> None:
    world = 4
    observations = [timeout(r, seq=19) for r in range(world) if r != 2]
    observations.append(timeout(2, seq=19, op="BROADCAST", numel=1))
    d = analyze(scan(*observations, ranks=world))
    assert d.primary.class_id == "timeout/asymmetric-collectives"
    assert d.primary.confidence >= 0.5
    assert d.culprit is not None and d.culprit.ranks == (2,)


def test_every_rank_stuck_in_the_same_collective_has_no_culprit() -> None:
    world = 8
    observations = [timeout(r, seq=7) for r in range(world)]
    observations += [summary(r, 7, 7, 6) for r in range(world)]
    d = analyze(scan(*observations, ranks=world))
    assert d.culprit is None
    assert "stalled" in (d.no_culprit_reason or "")
    assert d.primary.class_id == "unknown"
    assert d.primary.confidence < 0.5
    assert {c.class_id for c in d.diagnoses} >= {"timeout/straggler-input", "timeout/asymmetric-collectives"}


def test_checkpoint_on_rank0_with_a_30_minute_barrier_is_rank0_only_work() -> None:
    world = 4
    observations = [timeout(r, seq=2, op="BROADCAST", numel=1, timeout_ms=1800000) for r in range(1, world)]
    observations.append(
        obs("context-checkpoint-save", "context", ("timeout/rank0-only-work",), rank=0, t=5.0)
    )
    d = analyze(scan(*observations, ranks=world))
    assert d.primary.class_id == "timeout/rank0-only-work"
    assert d.primary.confidence >= 0.6
    assert d.culprit is not None and d.culprit.ranks == (0,)
    assert d.facts["timeout_ms"] == 1800000
    assert d.primary.evidence[0].signature == "context-checkpoint-save"


def test_compile_lines_and_a_low_seqnum_are_jit_compile() -> None:
    observations = [timeout(r, seq=1) for r in range(4)]
    observations.append(obs("context-ninja-build", "context", ("timeout/jit-compile",), rank=1))
    d = analyze(scan(*observations, ranks=4))
    assert d.primary.class_id == "timeout/jit-compile"


def test_xid_host_is_the_culprit_host() -> None:
    world = 16
    observations = [init(r, f"node-{r // 8}", r % 8, world) for r in range(world)]
    observations.append(
        obs("nvrm-xid", "root", ("hardware/gpu-xid",), host="node-1", t=100.0, xid=79, weight=2.0)
    )
    observations.append(obs("ib-completion-error", "root", ("network/ib-rdma",), host="node-0", t=130.0))
    observations += [timeout(r, t=700.0) for r in range(world)]
    d = analyze(scan(*observations))
    assert d.primary.class_id == "hardware/gpu-xid"
    assert d.culprit is not None and d.culprit.hosts == ("node-1",)
    assert d.facts["xid"] == 79
    assert d.facts["culprit_host"] == "node-1"
    assert [c.class_id for c in d.diagnoses][:2] == ["hardware/gpu-xid", "network/ib-rdma"]


def test_application_xid_with_illegal_access_prefers_the_application() -> None:
    observations = [
        obs("nvrm-xid", "root", ("hardware/gpu-xid",), host="n1", xid=13),
        obs("cuda-illegal-access", "root", ("cuda/illegal-access",), rank=0, host="n1"),
    ]
    d = analyze(scan(*observations))
    assert d.primary.class_id == "cuda/illegal-access"


def test_peer_exit_alone_names_the_peer_host() -> None:
    observations = [
        obs(
            "nccl-remote-error",
            "cascade",
            ("network/peer-exit",),
            rank=1,
            symptom="remote-error",
            peer="ip-10-0-0-7<47023>",
        )
    ]
    d = analyze(scan(*observations))
    assert d.primary.class_id == "network/peer-exit"
    assert d.culprit is not None and d.culprit.hosts == ("ip-10-0-0-7",)
    assert d.symptom == "remote-error"


def test_peer_exit_loses_to_any_root_line() -> None:
    observations = [
        obs("nccl-remote-error", "cascade", ("network/peer-exit",), rank=r, symptom="remote-error")
        for r in range(1, 8)
    ]
    observations.append(obs("host-oom-killed", "root", ("system/host-oom",), host="n3"))
    d = analyze(scan(*observations, ranks=8))
    assert d.primary.class_id == "system/host-oom"
    assert d.primary.confidence > d.diagnoses[1].confidence


def torchrun_entry(signature: str, rank: int, exit_code: int) -> Observation:
    """A ChildFailedError entry: the agent's own line, so no [rankN] prefix, the rank is a field."""
    line = Line(source="agent.log", lineno=40 + rank, text=f"rank      : {rank} (local_rank: {rank})")
    fields = {"rank": rank, "exit_code": exit_code, "host": "gpu-node-3"}
    return Observation(signature, (), "cascade", line, fields, 1.0, "child-failed")


def test_torchrun_root_cause_block_names_the_killed_rank() -> None:
    observations = [
        obs("kernel-oom-kill", "root", ("system/host-oom",)),
        torchrun_entry("torchrun-root-cause-block", rank=4, exit_code=-9),
        torchrun_entry("elastic-worker-failed", rank=2, exit_code=-6),
    ]
    d = analyze(scan(*observations, ranks=8))
    assert d.primary.class_id == "system/host-oom"
    assert d.culprit is not None and d.culprit.ranks == (4,)
    assert d.culprit.hosts == ("gpu-node-3",)


def test_nothing_recognised_is_unknown_with_low_confidence() -> None:
    d = analyze(scan())
    assert [c.class_id for c in d.diagnoses] == ["unknown"]
    assert 0 < d.primary.confidence < 0.5
    assert d.culprit is None and d.no_culprit_reason
    assert d.symptom is None


def test_flight_recorder_finding_feeds_the_culprit_and_the_class() -> None:
    finding = FRFinding(
        ranks_dumped=tuple(range(8)),
        culprit_ranks=(9,),
        reason="process group 0: rank(s) 9 never joined collective #12 (all_reduce)",
        kind="missing-ranks",
        pg="0",
        seqnum=12,
        optype="all_reduce",
    )
    d = analyze(scan(), finding)
    assert d.culprit is not None and d.culprit.ranks == (9,)
    assert d.primary.class_id == "timeout/straggler-input"
    assert d.symptom == "collective-timeout"

    mismatch = FRFinding(tuple(range(4)), (1,), "ranks disagree about collective #3", "mismatch", "0", 3)
    d = analyze(scan(), mismatch)
    assert d.primary.class_id == "timeout/asymmetric-collectives"
    assert d.culprit is not None and d.culprit.ranks == (1,)


def test_duplicate_gpu_never_blames_a_rank() -> None:
    observations = [obs("nccl-duplicate-gpu", "root", ("config/duplicate-gpu",), rank=1, other_rank=0)]
    d = analyze(scan(*observations, ranks=2))
    assert d.primary.class_id == "config/duplicate-gpu"
    assert d.culprit is None


def test_json_contract_holds() -> None:
    d = analyze(scan(obs("cuda-oom", "root", ("cuda/oom",), rank=0)))
    out = d.to_json()
    assert out["diagnoses"][0]["class"] == "cuda/oom"
    assert out["diagnoses"][0]["evidence"][0] == {
        "source": "attempt_0/0/stderr.log",
        "line": 1,
        "text": "cuda-oom line",
        "signature": "cuda-oom",
    }
    assert set(d.facts) <= {"culprit_rank", "culprit_host", *KNOWN_FIELDS}


def test_monitored_barrier_report_names_the_missing_rank() -> None:
    report = Observation(
        "monitored-barrier-missing-rank",
        (),
        "cascade",
        Line(
            source="job.log",
            lineno=9,
            text="[Rank 0]: Rank 3 failed to pass monitoredBarrier in 30000 ms",
            rank=0,
        ),
        {"rank": 3, "timeout_ms": 30000},
        1.2,
        "missing-rank",
    )
    d = analyze(scan(report, ranks=4))
    assert d.culprit is not None and d.culprit.ranks == (3,)
    assert d.primary.class_id == "timeout/straggler-input"
    assert d.symptom == "missing-rank"


def test_a_mismatch_report_does_not_blame_the_rank_that_wrote_it() -> None:
    report = obs(
        "collective-mismatch-detected",
        "root",
        ("timeout/asymmetric-collectives",),
        rank=1,
        pg_rank=1,
        other_rank=0,
        seqnum=3104,
        optype="ALLREDUCE",
    )
    d = analyze(scan(report, ranks=2))
    assert d.primary.class_id == "timeout/asymmetric-collectives"
    assert d.culprit is None
    assert "odd one" in (d.no_culprit_reason or "")


def test_many_ranks_with_the_same_error_and_no_timestamps_name_nobody() -> None:
    observations = [obs("cuda-oom", "root", ("cuda/oom",), rank=r) for r in (1, 4, 6)]
    d = analyze(scan(*observations, ranks=8))
    assert d.culprit is None
    assert "no timestamp" in (d.no_culprit_reason or "")


def test_two_ranks_out_of_many_with_a_root_error_are_both_named() -> None:
    observations = [obs("cuda-oom", "root", ("cuda/oom",), rank=r, t=50.0 + r) for r in (3, 9)]
    observations += [timeout(r) for r in range(16) if r not in (3, 9)]
    d = analyze(scan(*observations, ranks=16))
    assert d.culprit is not None and d.culprit.ranks == (3, 9)


def _init_line(rank: int, host: str, world: int) -> Observation:
    line = Line(source="job.log", lineno=1 + rank, text="Init COMPLETE", host=host, pid=4000 + rank)
    return Observation("nccl-init-complete", (), "context", line, {"rank": rank, "world_size": world})


def test_single_node_job_puts_the_culprit_on_its_only_host() -> None:
    failure = [
        obs("cuda-oom", "root", ("cuda/oom",), rank=2, t=10.0),
        obs("nccl-proxy-peer-closed", "cascade", ("network/peer-exit",), host="box-1", symptom="peer-closed"),
    ]
    # The other three ranks of a 4-rank job are on box-1, so rank 2 can only be there too.
    fits = analyze(scan(*[_init_line(r, "box-1", 4) for r in (0, 1, 3)], *failure, ranks=4))
    assert fits.culprit is not None and fits.culprit.ranks == (2,)
    assert fits.culprit.hosts == ("box-1",)
    # One host in sight is not enough: without the job size, or with ranks unaccounted for, rank 2
    # may run on a node whose lines are not in the bundle.
    for unproven in (analyze(scan(*failure, ranks=4)), analyze(scan(_init_line(0, "box-1", 8), *failure))):
        assert unproven.culprit is not None and unproven.culprit.ranks == (2,)
        assert unproven.culprit.hosts == ()


def test_torchrun_entry_maps_a_lagging_rank_to_its_host() -> None:
    observations = [timeout(r) for r in range(8) if r != 6]
    observations.append(torchrun_entry("torchrun-root-cause-block", rank=6, exit_code=-6))
    d = analyze(scan(*observations, ranks=8))
    assert d.culprit is not None and d.culprit.ranks == (6,)
    assert d.culprit.hosts == ("gpu-node-3",)


def test_a_plain_error_exit_without_any_root_line_is_not_a_culprit() -> None:
    # After the watchdog aborts the communicator, the next collective raises and the rank exits with 1:
    # torchrun calls that the root cause, but it is a victim like the others. A signal death is not.
    unattributed = obs("watchdog-timeout", "cascade", symptom="collective-timeout", timeout_ms=600000)
    victim = torchrun_entry("torchrun-root-cause-block", rank=1, exit_code=1)
    assert analyze(scan(unattributed, victim, ranks=4)).culprit is None
    crashed = torchrun_entry("torchrun-root-cause-block", rank=1, exit_code=-11)
    d = analyze(scan(unattributed, crashed, ranks=4))
    assert d.culprit is not None and d.culprit.ranks == (1,)
