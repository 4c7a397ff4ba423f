"""Hostile input through the real `ncclbot` entry point: secrets, escape sequences, markup, huge numbers and
broken stores never leak, drive the terminal or hide a diagnosis (issue 9, part A)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli

SECRETS = {
    "xapp": "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef",
    "aws": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "redis": "hunter2",
    "azure": "abcdEFGH1234567890abcdEFGH1234567890abcdEFGH12==",
    "flag": "s3cr3t",
    "npm": "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "short": "abc",
}

# What a terminal would act on: ESC (CSI/OSC), the C1 CSI, BEL, and the bidi override / isolate.
CONTROLS = ("\x1b", "\x9b", "\x07", "\u202e", "\u2066")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"NCCLBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite3'}", **extra}


def _oom_log_with_secrets(tmp_path: Path) -> Path:
    s = SECRETS
    log = tmp_path / "rank3.log"
    log.write_text(
        f"[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB "
        f"app={s['xapp']} aws {s['aws']} redis://:{s['redis']}@redis:6379 "
        f"AccountName=a;AccountKey={s['azure']};EndpointSuffix=x --password {s['flag']} "
        f"{s['npm']} PASSWORD={s['short']}\n"
    )
    return log


def _stored_excerpts(tmp_path: Path) -> str:
    with sqlite3.connect(tmp_path / "store.sqlite3") as connection:
        return "\n".join(row[0] for row in connection.execute("SELECT evidence_excerpt FROM occurrences"))


def _leaked(text: str) -> list[str]:
    return [name for name, secret in SECRETS.items() if secret in text]


def test_secrets_never_reach_the_terminal_the_json_or_the_store(tmp_path: Path) -> None:
    log = _oom_log_with_secrets(tmp_path)
    human = run_cli("diagnose", str(log), env=_env(tmp_path, COLUMNS="400"))
    document = run_cli("diagnose", str(log), "--json", "--job-id", "j2", env=_env(tmp_path))
    assert human.returncode == 0 and document.returncode == 0
    assert "CUDA out of memory" in human.stdout.decode()
    assert json.loads(document.stdout)["diagnoses"][0]["class"] == "cuda/oom"
    excerpts = _stored_excerpts(tmp_path)
    assert "CUDA out of memory" in excerpts
    assert _leaked(human.stdout.decode()) == []
    assert _leaked(document.stdout.decode()) == []
    assert _leaked(excerpts) == []


def test_a_password_in_an_extracted_peer_never_reaches_the_runbook(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text(
        "gpu-node-001:1:1 [0] NCCL WARN NET/IB : Got completion from peer https://u:pw0rd1@10.0.0.2<45678> "
        "with status=12 opcode=0 len=0 vendor err 129\n"
    )
    human = run_cli("diagnose", str(log), "--no-store")
    document = json.loads(run_cli("diagnose", str(log), "--no-store", "--json").stdout)
    assert document["diagnoses"][0]["class"] == "network/ib-rdma"
    assert "pw0rd1" not in human.stdout.decode()
    assert "pw0rd1" not in json.dumps(document)
    commands = [step["command"] or "" for step in document["runbook"]["steps"]]
    assert "ssh 10.0.0.2 ibstat" in commands  # the peer's host, without scheme or userinfo


def _hostile_host_log(tmp_path: Path) -> Path:
    host = "gpu1\x9b31m\u202e[link=https://evil.example]click[/link]\u2066"
    log = tmp_path / "rank13.log"
    log.write_text(
        "[rank13]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-29_03:11:45\n"
        f"  host      : {host}\n  rank      : 13 (local_rank: 5)\n  exitcode  : 1 (pid: 30257)\n"
    )
    return log


def test_a_hostile_culprit_host_is_stored_and_shown_as_plain_text(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert run_cli("diagnose", str(_hostile_host_log(tmp_path)), env=env).returncode == 0
    outputs = {
        command: run_cli(*command.split(), env=env)
        for command in ("incidents", "history", "report", "incidents --json", "history --json")
    }
    for command, result in outputs.items():
        assert result.returncode == 0, (command, result.stderr.decode())
        text = result.stdout.decode()
        assert "gpu1" in text, command
        assert not [c for c in CONTROLS if c in text], command
    # Rich would turn `[link=...]...[/link]` into a hyperlink and drop the brackets: it must stay text.
    assert "[link=https://evil" in outputs["report"].stdout.decode()
    with sqlite3.connect(tmp_path / "store.sqlite3") as connection:
        stored = [row[0] for row in connection.execute("SELECT hostname FROM nodes")]
    assert stored and not [c for c in CONTROLS if any(c in name for name in stored)]


def test_json_output_carries_no_control_characters(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_bytes(
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory \x1b[31mred\x1b[0m \x1b]8;;http://x\x07link"
        "\x1b]8;;\x07 \u202egnp.exe \x9b2J <!channel>\n".encode()
    )
    result = run_cli("diagnose", str(log), "--no-store", "--json")
    assert result.returncode == 0
    raw = result.stdout.decode()
    assert not [c for c in CONTROLS if c in raw]
    assert "\\u001b" not in raw and "\\u009b" not in raw
    text = json.loads(raw)["diagnoses"][0]["evidence"][0]["text"]
    assert "CUDA out of memory red link" in text
    # JSON is data: `<!channel>` is kept as written and neutralised by the Slack renderer (slack_text).
    assert "<!channel>" in text


def test_bidi_controls_in_a_file_name_do_not_reach_stderr(tmp_path: Path) -> None:
    name = tmp_path / "rank0\u202egol.txt"
    name.write_bytes(b"\x00\x01\x02\x03" * 4096)
    result = run_cli("diagnose", str(name), "--no-store")
    assert result.returncode == 2
    stderr = result.stderr.decode()
    assert "rank0gol.txt" in stderr and "\u202e" not in stderr
    assert len(stderr.strip().splitlines()) == 1


def _timeout_log(tmp_path: Path, digits: int) -> Path:
    log = tmp_path / f"timeout{digits}.log"
    log.write_text(
        "[rank0]:[E ProcessGroupNCCL.cpp:1 ] [PG 0 Rank 0] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={'9' * digits}) "
        "ran for 5 milliseconds before timing out.\n"
    )
    return log


def test_a_20_digit_timeout_is_stored_without_breaking_the_insert(tmp_path: Path) -> None:
    result = run_cli("diagnose", str(_timeout_log(tmp_path, 20)), "--json", env=_env(tmp_path))
    assert result.returncode == 0, result.stderr.decode()
    document = json.loads(result.stdout)
    assert document["incident"]["occurrences"] == 1
    assert result.stderr == b""


def test_a_400_digit_timeout_still_fills_the_runbook(tmp_path: Path) -> None:
    result = run_cli("diagnose", str(_timeout_log(tmp_path, 400)), "--no-store", "--json")
    assert result.returncode == 0, result.stderr.decode()
    document = json.loads(result.stdout)
    assert document["runbook"]["steps"]
    assert "9" * 40 not in json.dumps(document["runbook"])


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"HOME": "/proc/self/nonexistent", "NCCLBOT_DATABASE_URL": ""}, "No such file"),
        ({"NCCLBOT_DATABASE_URL": "postgresql+pg8000://u:pw9secret@127.0.0.1:1/x"}, "pg8000"),
        ({"NCCLBOT_DATABASE_URL": "postgresql://u:pw9secret@127.0.0.1:notaport/x"}, "cannot parse"),
        ({"NCCLBOT_DATABASE_URL": "mysql://u:pw9secret@127.0.0.1/x"}, "unsupported database"),
    ],
    ids=["unwritable-home", "driver-not-installed", "bad-url", "unsupported-backend"],
)
def test_a_store_that_cannot_be_opened_never_hides_the_diagnosis(
    tmp_path: Path, env: dict[str, str], reason: str
) -> None:
    result = run_cli("diagnose", str(_oom_log_with_secrets(tmp_path)), env=env)
    assert result.returncode == 0, result.stderr.decode()
    assert "cuda/oom" in result.stdout.decode()
    stderr = result.stderr.decode()
    assert stderr.startswith("ncclbot: warning: diagnosis not stored:") and reason in stderr
    assert "pw9secret" not in stderr
    assert len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["history", "incidents", "report", "db upgrade"])
def test_a_corrupt_sqlite_file_is_one_clear_line(tmp_path: Path, command: str) -> None:
    corrupt = tmp_path / "corrupt.sqlite3"
    corrupt.write_bytes(b"this is not a database\n" * 100)
    result = run_cli(*command.split(), "--database-url", f"sqlite:///{corrupt}")
    assert result.returncode == 2
    assert result.stderr.decode().strip() == "ncclbot: cannot use the database: file is not a database"


def test_an_unreadable_flight_recorder_dump_given_alone_is_unusable_input(tmp_path: Path) -> None:
    dump = tmp_path / "nccl_trace_rank_3"
    dump.write_bytes(b"\x80\x02}q\x00(X\x07\x00\x00\x00entries")  # cut mid-write
    result = run_cli("diagnose", str(dump), "--no-store")
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode().startswith("ncclbot: ") and "nccl_trace_rank_3" in result.stderr.decode()
    assert len(result.stderr.decode().strip().splitlines()) == 1


def test_an_unreadable_dump_beside_a_log_is_skipped_with_a_warning(tmp_path: Path) -> None:
    cycle = b"\x80\x02}q\x00(X\x07\x00\x00\x00entries]q\x01h\x01au."  # entries contains itself
    (tmp_path / "nccl_trace_rank_3").write_bytes(cycle)
    (tmp_path / "rank3.log").write_text("[rank3]: torch.OutOfMemoryError: CUDA out of memory.\n")
    result = run_cli("diagnose", str(tmp_path), "--no-store")
    assert result.returncode == 0, result.stderr.decode()
    assert "cuda/oom" in result.stdout.decode()
    assert "nccl_trace_rank_3" in result.stderr.decode() and "warning" in result.stderr.decode()
