"""Flood control for context signatures: stop looking at setup lines that keep saying what is known.

NCCL_DEBUG=INFO prints every communicator's setup again (Init START, channel and ring lines, Connected
all rings, Init COMPLETE) for every process, and progress lines repeat every step. The scanner keeps only
the first few observations per signature and writer (`scan.MAX_PER_WRITER`), so once those are in, such
lines only cost a prefix parse and a regex run each. Two levels of sleep, per source:

- a context signature whose last `QUIET_PER_SIGNATURE` looked-at lines kept nothing new dozes: only every
  `DOZE_SAMPLE`-th of its candidate lines is still looked at, and one that keeps something wakes it;
- once `QUIET_LINES` context candidate lines in a row kept nothing new, the source samples: the scanner
  then asks the prefilter for the first occurrence of each context keyword per block only, at C speed,
  and one such line that keeps something wakes everything again from the next line on.

Root and cascade signatures never sleep: an error line is always looked at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import Enum

QUIET_PER_SIGNATURE = 32
DOZE_SAMPLE = 64
QUIET_LINES = 64


class Turn(Enum):
    """What a line's outcome means for the scan of the rest of the block."""

    GO_ON = "go-on"
    SAMPLE = "sample"  # from the next line on, only first occurrences of context keywords
    WAKE = "wake"  # from the next line on, every line again


@dataclass(slots=True)
class FloodControl:
    context: frozenset[int]  # catalog indices of the context signatures
    sampling: bool = False
    # Sampling for good, whatever a line says: a span scanned on a guess (see `source_scan.settles`).
    held: bool = False
    quiet: int = 0
    quiet_of: Counter[int] = field(default_factory=Counter)
    dozing: set[int] = field(default_factory=set)
    skipped: Counter[int] = field(default_factory=Counter)

    def choose(self, signatures: tuple[int, ...]) -> tuple[list[int], bool]:
        """The candidate signatures to look at on a line, and whether the line was a context candidate."""
        chosen: list[int] = []
        had_context = False
        for index in signatures:
            if index not in self.context:
                chosen.append(index)
                continue
            had_context = True
            if index in self.dozing and not self.sampling:
                self.skipped[index] += 1
                if self.skipped[index] % DOZE_SAMPLE:
                    continue
            chosen.append(index)
        return chosen, had_context

    def outcome(self, looked: Collection[int], productive: Collection[int]) -> Turn:
        """After a context candidate line: `looked` its context signatures looked at, `productive`
        those that kept a new observation."""
        for index in looked:
            if index in productive:
                self.quiet_of[index] = 0
                self.dozing.discard(index)
            else:
                self.quiet_of[index] += 1
                if self.quiet_of[index] >= QUIET_PER_SIGNATURE:
                    self.dozing.add(index)
        if self.held:
            return Turn.GO_ON
        if productive:
            self.quiet = 0
            if self.sampling:
                self.sampling = False
                return Turn.WAKE
            return Turn.GO_ON
        if self.sampling:
            return Turn.GO_ON
        self.quiet += 1
        if self.quiet >= QUIET_LINES:
            self.sampling = True
            return Turn.SAMPLE
        return Turn.GO_ON
