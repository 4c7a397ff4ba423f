"""Coverage-guided fuzzing of the targets in tests/fuzz/targets.py with atheris (libFuzzer), for a fixed
time; a crash (any exception the target's contract does not allow), a hang past `-timeout` or memory
past `-rss_limit_mb` stops it and leaves the input in `crash-*` / `timeout-*` / `oom-*` files.

    python tests/fuzz/fuzz.py TARGET [CORPUS_DIR] -max_total_time=300 -timeout=20 -rss_limit_mb=2048

TARGET is one of reader, matcher, flight_recorder, slack_payload, webhook_payload. Without a corpus
folder it starts from the seeds below (a few real shapes).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import atheris  # noqa: E402

# Everything the targets reach is imported here, inside the block, so that it is instrumented for
# coverage (the targets import some of it lazily).
with atheris.instrument_imports(include=["matcher", "bot", "runbooks"]):
    import bot.services.diagnose
    import bot.slack.app
    import bot.webhook.shapes  # noqa: F401
    import matcher.flight_recorder.load
    import matcher.pipeline
    import matcher.reading.read  # noqa: F401
    from tests.fuzz import targets

SEEDS: dict[str, list[bytes]] = {
    "reader": [
        b"[rank3]: torch.OutOfMemoryError: CUDA out of memory\n",
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00",
        b"PK\x05\x06" + b"\x00" * 18,
    ],
    "matcher": [
        b"[rank0]:[E ProcessGroupNCCL.cpp:1 ] Watchdog caught collective operation timeout: "
        b"WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)\n",
        b"gpu-node-001:1:1 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<45678> with status=12\n",
    ],
    "flight_recorder": [
        b"\x80\x02}q\x00(X\x07\x00\x00\x00entriesq\x01]q\x02X\x07\x00\x00\x00versionq\x03X\x03\x00\x00\x002.4q\x04u.",
        b'{"version": "2.4", "entries": [], "pg_config": {}}',
    ],
    "webhook_payload": [
        b'{"cluster": "c1", "job_id": "7", "state": "FAILED", "logs": [{"name": "r0.log", "text": "x"}]}',
        b'{"alerts": [{"status": "firing", "labels": {"job_name": "j", "namespace": "n"}}], "version": "4"}',
        b'{"source": "slurm", "cluster": "c", "job_id": "7", "node_list": "gpu-[1-3,7]", "exit_code": "1:0"}',
    ],
    "slack_payload": [
        b"\x00command=%2Fnccl&text=status&channel_id=C1&user_id=U1&trigger_id=1",
        b'\x01{"type": "event_callback", "event_id": "Ev1", "event": {"type": "app_mention", '
        b'"channel": "C1", "ts": "1.1", "text": "<@UBOT> hi"}}',
    ],
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in targets.TARGETS:
        raise SystemExit(
            f"usage: {sys.argv[0]} TARGET [libFuzzer options]; TARGET in {sorted(targets.TARGETS)}"
        )
    name = sys.argv.pop(1)
    target = targets.TARGETS[name]
    arguments = list(sys.argv)
    if not any(not a.startswith("-") for a in arguments[1:]):  # no corpus folder given: seed one
        import tempfile

        corpus = Path(tempfile.mkdtemp(prefix=f"ncclbot-fuzz-{name}-"))
        for index, seed in enumerate(SEEDS.get(name, [])):
            (corpus / f"seed-{index}").write_bytes(seed)
        arguments.append(str(corpus))
    atheris.Setup(arguments, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
