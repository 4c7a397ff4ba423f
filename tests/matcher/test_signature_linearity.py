"""No signature regex is super-linear on a 64 KB line (the reader's line cap).

A hostile log can hold lines of 64 KB built from a signature's own keyword and fillers; a pattern that
backtracks quadratically on them takes seconds where a linear one takes milliseconds, so each such line
would cost a full regex time-out. Every signature is run on such lines, at 16 KB and at 64 KB: four times
the length must not cost (much) more than four times the time. That ratio is taken in CPU time, so a busy
machine does not make it fail; a wall-clock limit would (CI's slower, loaded runner took 0.25 s for linear
prose patterns that need 0.13 s here). A time-out far above any linear cost only keeps a catastrophic
pattern from hanging the run.
"""

from __future__ import annotations

import time

import pytest

from matcher.reading.read import ReadLimits
from matcher.scanning.catalog import Signature, load_catalog

CATALOG = load_catalog()
LINE = ReadLimits().max_line_bytes
# Linear patterns need up to about 0.13 s on 64 KB of their own keyword here; the quadratic ones found
# took 0.3-3 s, and the growth ratio below catches those. This limit is wall-clock (the regex module's
# time-out), so it only stops a pattern that would not finish at all.
HANG_S = 10.0
# Time at 64 KB over time at 16 KB: about 4 when linear, about 16 when quadratic. Below NOISE_S the
# ratio says nothing. NOISE_S is low enough that a quadratic pattern crosses it on a fast machine too (the
# quadratic ones found cost 0.01-0.02 s here and 0.03 s on CI, where the ratio first caught them); the
# ratio is then taken from the best of REPEAT runs, so one slow run does not make a linear pattern fail.
MAX_GROWTH = 10
NOISE_S = 0.003
REPEAT = 3
FILLERS = [" ", "\t", "a", "0", "a ", ":", "=", ".", "-", "'", "(", "/"]


def _hostile_lines(signature: Signature) -> list[str]:
    lines = []
    for keyword in signature.keywords[:4]:
        for filler in FILLERS:
            body = filler * (LINE // len(filler))
            lines.append((keyword + body)[:LINE])
            lines.append(((keyword + filler) * (LINE // (len(keyword) + len(filler)) + 1))[:LINE])
    for example in signature.match[:2]:
        first = example.split("\n")[0]
        if first:
            lines.append((first * (LINE // len(first) + 1))[:LINE])
            half = first[: max(len(first) // 2, 1)]
            lines.append((half * (LINE // len(half) + 1))[:LINE])
    return lines


def _cpu_seconds(signature: Signature, text: str) -> float:
    started = time.process_time()
    try:
        for _ in signature.pattern.finditer(text, timeout=HANG_S):
            pass
    except TimeoutError:
        pytest.fail(f"{signature.id} does not finish in {HANG_S} s on a {len(text)}-byte line {text[:40]!r}")
    return time.process_time() - started


def _best_cpu_seconds(signature: Signature, text: str) -> float:
    return min(_cpu_seconds(signature, text) for _ in range(REPEAT))


@pytest.mark.parametrize("signature", CATALOG.signatures, ids=lambda s: s.id)
def test_signature_regex_stays_linear_on_64_kb_hostile_lines(signature: Signature) -> None:
    for line in _hostile_lines(signature):
        if _cpu_seconds(signature, line) > NOISE_S:
            full = _best_cpu_seconds(signature, line)
            quarter = _best_cpu_seconds(signature, line[: len(line) // 4])
            assert full < MAX_GROWTH * max(quarter, NOISE_S / 4), (
                f"{signature.id}: {full:.3f} s on 64 KB but {quarter:.3f} s on 16 KB of {line[:40]!r}"
            )
