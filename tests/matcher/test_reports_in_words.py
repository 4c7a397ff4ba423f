"""Causes named in words rather than by the failing component's own line: issue titles, chat sentences and
admin tools' state lines (`ibstat`, `nvidia-smi -q`, `ulimit -l`, `systemctl status`).

The lines are written for the test. What matters is the weighing: a user's sentence is weaker evidence
than a line the stack logged, a denial or a question is none, a word that names no kind of memory leaves
the choice open, and a title that names only the symptom still yields the usual suspects.
"""

from __future__ import annotations

from pathlib import Path

from matcher.model import Diagnosis
from matcher.pipeline import diagnose

IB_COMPLETION_ERROR = (
    "gpu-a17:31377:31412 [3] transport/net_ib.cc:1694 NCCL WARN NET/IB : Got completion from peer "
    "10.3.4.12<53412> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
)


def _diagnose(tmp_path: Path, text: str) -> Diagnosis:
    path = tmp_path / "thread.log"
    path.write_text(text, encoding="utf-8")
    return diagnose([str(path)]).diagnosis


def _classes(diagnosis: Diagnosis) -> list[str]:
    return [score.class_id for score in diagnosis.diagnoses]


def test_users_sentence_ranks_below_a_logged_root_line_of_another_class(tmp_path: Path) -> None:
    diagnosis = _diagnose(tmp_path, "rank 3 was killed by the OOM killer\n" + IB_COMPLETION_ERROR)
    classes = _classes(diagnosis)
    assert classes[0] == "network/ib-rdma"
    assert "system/host-oom" in classes[1:3]


def test_tool_state_line_names_the_cause_alone(tmp_path: Path) -> None:
    text = (
        "$ ibstat mlx5_2\n"
        "CA 'mlx5_2'\n"
        "        Port 1:\n"
        "                State: Down\n"
        "                Physical state: Polling\n"
    )
    assert _classes(_diagnose(tmp_path, text))[0] == "network/ib-rdma"


def test_denied_or_asked_cause_is_no_evidence(tmp_path: Path) -> None:
    text = (
        "not an OOM, memory usage is flat\n"
        "is it /dev/shm?\n"
        "I increased --shm-size but it still hangs\n"
        "no Xid in dmesg\n"
    )
    classes = _classes(_diagnose(tmp_path, text))
    assert not {"system/host-oom", "shm/dev-shm", "hardware/gpu-xid"} & set(classes)


def test_memory_shortage_without_saying_whose_keeps_gpu_and_host_open(tmp_path: Path) -> None:
    classes = _classes(_diagnose(tmp_path, "学習中にメモリ不足でクラッシュします\n"))
    assert {"cuda/oom", "system/host-oom"} <= set(classes[:2])


def test_symptom_only_title_lists_timeout_suspects_not_unknown_alone(tmp_path: Path) -> None:
    diagnosis = _diagnose(tmp_path, "多机训练 NCCL 超时\n")
    assert diagnosis.symptom == "collective-timeout"
    assert len([c for c in _classes(diagnosis) if c.startswith("timeout/")]) >= 3
