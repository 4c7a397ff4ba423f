"""Container and log-shipper records: the message inside a JSON-lines line, with its time and host.

Docker's json-file driver writes `{"log": "...\\n", "stream": "stderr", "time": "2025-01-01T10:00:00.1Z"}`;
log shippers (Fluent Bit, Vector, Loki exports) and `kubectl logs` collectors write the same with
`message` / `msg` and `timestamp` / `@timestamp`, often with a `kubernetes` object naming the pod and node;
`journalctl -o json` writes `MESSAGE`, `__REALTIME_TIMESTAMP` (microseconds) and `_HOSTNAME`. `unwrap`
returns the message to be read like any other line, and what the record said about where and when it was
written. Anything that is not such a record comes back unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from matcher.reading.timestamps import epoch

MESSAGE_KEYS = ("log", "message", "msg", "MESSAGE")
TIME_KEYS = ("time", "timestamp", "@timestamp", "ts")
HOST_KEYS = ("host", "hostname", "_HOSTNAME", "node")
# A record this long is not one line of a training log (a dumped state, an API payload): left as it is.
MAX_RECORD_CHARS = 200_000


@dataclass(frozen=True, slots=True)
class Record:
    text: str
    time: float | None = None
    host: str | None = None


def unwrap(line: str) -> Record | None:
    """The message of a JSON-lines log record, or None when `line` is not one."""
    stripped = line.strip()
    if not stripped.startswith("{") or not stripped.endswith("}") or len(stripped) > MAX_RECORD_CHARS:
        return None
    try:
        record = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    message = next((record[k] for k in MESSAGE_KEYS if isinstance(record.get(k), str)), None)
    if message is None:
        return None
    return Record(text=message.rstrip("\n").rstrip("\r"), time=_time(record), host=_host(record))


def _time(record: dict[str, object]) -> float | None:
    micros = record.get("__REALTIME_TIMESTAMP")
    if isinstance(micros, str) and micros.isdigit():
        return int(micros) / 1_000_000
    for key in TIME_KEYS:
        value = record.get(key)
        if isinstance(value, str):
            return _iso(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value) / 1000 if value > 1e11 else float(value)  # epoch ms or s
    return None


def _iso(text: str) -> float | None:
    """`2025-01-01T10:00:00.123456789Z` (or with a space, an offset is read as UTC like the rest)."""
    if len(text) < 19 or text[4] != "-" or text[7] != "-" or text[10] not in "T ":
        return None
    try:
        year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
        hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    except ValueError:
        return None
    fraction = ""
    if len(text) > 20 and text[19] in ".,":
        digits = text[20:]
        fraction = digits[: len(digits) - len(digits.lstrip("0123456789"))]
    return epoch(year, month, day, hour, minute, second, fraction)


def _host(record: dict[str, object]) -> str | None:
    kubernetes = record.get("kubernetes")
    if isinstance(kubernetes, dict):
        for key in ("pod_name", "host"):
            if isinstance(kubernetes.get(key), str):
                return str(kubernetes[key])
    for key in HOST_KEYS:
        value = record.get(key)
        if isinstance(value, str) and value:
            return value
    return None


__all__ = ["Record", "unwrap"]
