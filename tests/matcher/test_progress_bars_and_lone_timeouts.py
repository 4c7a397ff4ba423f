"""What a progress bar's elapsed time says, who a lone timeout line implicates,
and what one nccl-tests process on one machine rules out.

Every excerpt is written for the test (hosts, pids, sizes and times are invented) in the shape users paste.
"""

from __future__ import annotations

import io
from pathlib import Path

from matcher.model import Diagnosis
from matcher.reading.prefixes import parse_line
from matcher.reading.read import Source
from tests.matcher.excerpts import class_ids, diagnose_text

RANK0 = "timeout/rank0-only-work"


def _culprit_ranks(diagnosis: Diagnosis) -> tuple[int, ...] | None:
    return tuple(diagnosis.culprit.ranks) if diagnosis.culprit else None


def _watchdog(rank: int, seq: int, op: str, numel: int, timeout_ms: int) -> str:
    return (
        f"[rank{rank}]:[E ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation "
        "timeout: "
        f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms}) "
        f"ran for {timeout_ms + 231} milliseconds before timing out.\n"
    )


def test_bar_that_ran_as_long_as_the_timeout_is_rank0_solo_work(tmp_path: Path) -> None:
    # A plain bar (no "tokenizer" or "Evaluating" wording) that had run 58 of the 60 minutes the peers waited
    # in a gradient allreduce mid-run: nothing else says what the missing side was doing.
    text = " 71%|███████   | 1420/2000 [58:12<23:47,  2.46s/it]\n" + "".join(
        _watchdog(r, 40213, "ALLREDUCE", 52_428_800, 3_600_000) for r in (5, 6)
    )
    diagnosis = diagnose_text(tmp_path, text)
    assert class_ids(diagnosis)[0] == RANK0
    assert _culprit_ranks(diagnosis) == (0,)


def test_bar_in_hours_counts_too(tmp_path: Path) -> None:
    text = "Epoch 2:  18%|█▊        | 90/500 [1:57:40<8:56:02, 78.5s/it]\n" + "".join(
        _watchdog(r, 9917, "_REDUCE_SCATTER_BASE", 8_388_608, 7_200_000) for r in (1, 2, 3)
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == RANK0


def test_bar_far_short_of_the_timeout_is_no_clue(tmp_path: Path) -> None:
    text = " 9%|▉         | 450/5000 [03:02<30:41,  2.47it/s]\n" + "".join(
        _watchdog(r, 6120, "ALLREDUCE", 31_457_280, 1_800_000) for r in (1, 2)
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] != RANK0


def test_a_bar_keeps_the_rank_tag_it_was_printed_under() -> None:
    source = Source("paste.log", opener=lambda: io.BytesIO(b""))
    bar = "[rank5]:  40%|████      | 400/1000 [10:02<15:03,  1.51s/it]"
    assert parse_line(bar.encode(), source, 1).rank == 5
    glued = parse_line(f"{bar}RuntimeError: stop".encode(), source, 1)
    assert (glued.rank, glued.text) == (5, "RuntimeError: stop")


def test_long_bar_of_another_rank_does_not_name_rank0(tmp_path: Path) -> None:
    # Rank 4 was the one busy: whatever the class, rank 0 is not the rank that kept the others waiting.
    text = "[rank4]:  88%|████████▊ | 880/1000 [29:31<04:01,  2.01s/it]\n" + "".join(
        _watchdog(r, 7301, "ALLREDUCE", 41_943_040, 1_800_000) for r in (1, 2)
    )
    diagnosis = diagnose_text(tmp_path, text)
    assert _culprit_ranks(diagnosis) != (0,)
    assert class_ids(diagnosis)[0] != RANK0


def test_a_killed_worker_outranks_a_long_bar(tmp_path: Path) -> None:
    text = (
        " 94%|█████████▍| 940/1000 [28:51<01:50,  1.84s/it]\n"
        + _watchdog(1, 88, "ALLREDUCE", 1, 1_800_000)
        + _watchdog(2, 88, "ALLREDUCE", 1, 1_800_000)
        + "E1129 05:12:44.000000 3391 torch/distributed/elastic/multiprocessing/api.py:882] failed "
        "(exitcode: -9) local_rank: 0 (pid: 5120) of binary: /opt/venv/bin/python3\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "system/host-oom"


def test_lone_early_scalar_allreduce_timeout_guesses_rank0_work_but_names_no_rank0(tmp_path: Path) -> None:
    # One rank's line on a 1-element allreduce: any rank may be the missing one, rank 0 no more than others.
    # Resolved threads of this context (30-min timeout on one of the first collectives) were mostly the main
    # process preparing data, so that class leads as a low-confidence guess; the culprit needs evidence.
    diagnosis = diagnose_text(tmp_path, _watchdog(5, 3, "ALLREDUCE", 1, 1_800_000))
    assert _culprit_ranks(diagnosis) != (0,)
    classes = class_ids(diagnosis)
    assert classes[0] == RANK0
    assert diagnosis.primary.confidence <= 0.45
    assert "unknown" in classes


def test_lone_timeout_on_a_broadcast_still_points_at_its_usual_source(tmp_path: Path) -> None:
    diagnosis = diagnose_text(tmp_path, _watchdog(2, 11, "BROADCAST", 312, 1_800_000))
    assert class_ids(diagnosis)[0] == RANK0
    assert _culprit_ranks(diagnosis) == (0,)


def test_several_peers_timing_out_without_rank0_still_implicate_it(tmp_path: Path) -> None:
    text = "".join(_watchdog(r, 52011, "ALLREDUCE", 1, 1_800_000) for r in (1, 2, 3, 4, 5, 6, 7))
    assert _culprit_ranks(diagnose_text(tmp_path, text)) == (0,)


def _nccl_tests(rows: list[tuple[int, int, str]]) -> str:
    header = (
        "# nThread 1 nGpus 4 minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
    )
    listing = "".join(
        f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host:>9s} device {rank % 4:2d} [0x{16 + rank:02x}] "
        "NVIDIA L40S\n"
        for rank, pid, host in rows
    )
    _, pid, host = rows[0]
    failure = (
        f"{host}: Test NCCL failure common.cu:1012 'unhandled system error'\n"
        f" .. {host} pid {pid}: Test failure common.cu:899\n"
    )
    return header + listing + failure


def test_one_nccl_tests_process_on_one_machine_points_at_shm(tmp_path: Path) -> None:
    text = _nccl_tests([(r, 61877, "lab-srv3") for r in range(4)])
    assert class_ids(diagnose_text(tmp_path, text))[0] == "shm/dev-shm"


def test_nccl_tests_across_machines_keeps_the_network_first(tmp_path: Path) -> None:
    text = _nccl_tests(
        [(0, 2211, "rack1-n01"), (1, 2211, "rack1-n01"), (2, 9034, "rack1-n02"), (3, 9034, "rack1-n02")]
    )
    classes = class_ids(diagnose_text(tmp_path, text))
    assert classes[0] == "network/interface-selection"
    assert "shm/dev-shm" in classes[:3]


def _store_timeout(peer: str) -> str:
    return (
        f"[E socket.cpp:922] [c10d] The client socket has timed out after 60s while trying to connect to "
        f"({peer}, 29611).\n"
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d "
        "store has failed. See inner exception for details.\n"
    )


def _culprit_hosts(diagnosis: Diagnosis) -> tuple[str, ...]:
    return tuple(diagnosis.culprit.hosts) if diagnosis.culprit else ()


def test_masked_rendezvous_address_is_not_a_host(tmp_path: Path) -> None:
    for placeholder in ("IP2", "ip_address", "MASTER_IP", "x.x.x.x", "your_master"):
        diagnosis = diagnose_text(tmp_path, _store_timeout(placeholder))
        assert class_ids(diagnosis)[0] == "rendezvous/store"
        assert _culprit_hosts(diagnosis) == (), placeholder


def test_real_rendezvous_host_is_still_named(tmp_path: Path) -> None:
    for host in ("trainer-head-0", "10.40.2.17", "ipa-node3"):
        assert _culprit_hosts(diagnose_text(tmp_path, _store_timeout(host))) == (host,)


def test_training_bar_far_longer_than_the_timeout_is_no_rank0_clue(tmp_path: Path) -> None:
    # The epoch bar had run for hours before the hang: it is the training loop itself, not solo work.
    text = "Epoch 0:  9%|▉         | 41020/450000 [5:51:02<58:20:11,  1.95it/s, loss=2.71]\n" + "".join(
        _watchdog(r, 82044, "ALLREDUCE", 16_777_216, 1_800_000) for r in (2, 5)
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] != RANK0


def test_qp_rtr_timeout_between_ipv4_mapped_gids_points_at_the_fabric_first(tmp_path: Path) -> None:
    # Both ends already use routable RoCE v2 GIDs of the same family: the path between the NICs is the
    # suspect (rails crossed, RoCE dropped), with the GID index still in view as the runner-up.
    text = (
        "[2026-05-02 11:40:09] gpu-r2-03:41007:41188 [2] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp "
        "failed with 110 Connection timed out, on dev mlx5_2:1, curr state INIT, next state RTR, "
        "local GID index 3, local GID ::ffff:10.20.2.3, remote GID ::ffff:10.20.7.14\n"
    )
    classes = class_ids(diagnose_text(tmp_path, text))
    assert classes[0] == "network/ib-rdma"
    assert "network/roce-gid" in classes[:3]


def test_qp_rtr_timeout_on_a_link_local_gid_stays_a_gid_problem_first(tmp_path: Path) -> None:
    text = (
        "[2026-05-02 11:40:09] gpu-r2-03:41007:41188 [2] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp "
        "failed with 110 Connection timed out, on dev mlx5_2:1, curr state INIT, next state RTR, "
        "local GID index 1, local GID fe80::ac0:ebff:feda:1cfb, remote GID fe80::ac0:ebff:feda:2b10\n"
    )
    classes = class_ids(diagnose_text(tmp_path, text))
    assert classes[0] == "network/roce-gid"
    assert "network/ib-rdma" in classes[:3]


def test_qp_rtr_timeout_without_gids_keeps_the_gid_first(tmp_path: Path) -> None:
    text = (
        "gpu-r2-03:41007:41188 [2] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error "
        "Connection timed out\n"
    )
    assert class_ids(diagnose_text(tmp_path, text))[0] == "network/roce-gid"


def test_missing_gid_device_stays_a_gid_problem_only(tmp_path: Path) -> None:
    text = (
        "gpu-r2-03:41007:41188 [2] misc/ibvwrap.cc:291 NCCL WARN Call to ibv_modify_qp failed with 19 "
        "No such device\n"
    )
    d = diagnose_text(tmp_path, text)
    assert class_ids(d)[0] == "network/roce-gid"
    # The line is not also read as a generic verbs failure: IB may only be listed as a next check.
    assert all(s.evidence == () for s in d.diagnoses if s.class_id == "network/ib-rdma")
