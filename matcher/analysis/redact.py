"""Secrets out of evidence: log lines quoted in a diagnosis are printed, stored and posted to chat,
and training logs often echo environment dumps, launch commands and URLs with credentials in them.

`redact(text)` replaces what looks like a credential with `[REDACTED]` and keeps everything around it, so
the evidence still reads. The rules are data (`secrets.toml`: known token formats, `KEY=value` where the
key names a secret, `--password x`, URL userinfo and signatures), each with examples that must be masked
and ordinary lines that must survive; a test runs them all.

Redaction must run on the whole text before any cut: a token cut in half by an excerpt limit no longer
looks like a token. `redact` also masks a token *prefix* that ends the text (`...ghp_abc`), because texts
that reach it may already have been capped by the reader.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Literal

import regex

from matcher.model import Culprit, Diagnosis, FieldValue

MASK = "[REDACTED]"
RULES_FILE = Path(__file__).with_name("secrets.toml")

# A regex timeout per pattern keeps a hostile line from stalling the diagnosis; on timeout the whole
# text is masked rather than shown unredacted.
_TIMEOUT_S = 0.05


@dataclass(frozen=True, slots=True)
class SecretRule:
    id: str
    kind: Literal["token", "value"]
    pattern: regex.Pattern[str]
    prefixes: tuple[str, ...] = ()
    mask_examples: tuple[tuple[str, str], ...] = ()  # (text, the secret inside it)
    keep_examples: tuple[str, ...] = ()


@cache
def rules() -> tuple[SecretRule, ...]:
    with RULES_FILE.open("rb") as handle:
        document = tomllib.load(handle)
    loaded = []
    for raw in document["rule"]:
        kind = raw["kind"]
        if kind not in ("token", "value"):
            raise ValueError(f"secrets.toml rule {raw['id']}: kind must be token or value")
        pattern = regex.compile(raw["pattern"])
        if kind == "value" and "value" not in pattern.groupindex:
            raise ValueError(f"secrets.toml rule {raw['id']}: a value rule needs a (?P<value>...) group")
        loaded.append(
            SecretRule(
                id=raw["id"],
                kind=kind,
                pattern=pattern,
                prefixes=tuple(raw.get("prefix", ())),
                mask_examples=tuple((m["text"], m["secret"]) for m in raw.get("mask", ())),
                keep_examples=tuple(raw.get("keep", ())),
            )
        )
    return tuple(loaded)


@cache
def _cut_tail() -> regex.Pattern[str]:
    """A token prefix, or URL userinfo, that runs to the end of the text: what is left of a secret that
    an earlier cap cut short. A bare port (`tcp://master:29500` at the end of a line) is not userinfo."""
    prefixes = sorted({p for rule in rules() for p in rule.prefixes}, key=len, reverse=True)
    tokens = "|".join(regex.escape(p) for p in prefixes)
    return regex.compile(
        rf"(?<![A-Za-z0-9])(?:{tokens})[A-Za-z0-9_.+/=-]*\Z"
        r"|(?<=(?i:\b[a-z][a-z0-9+.-]*://)[^\s/?#:@\"'<>]*:)(?!\d+\Z)[^\s/?#\"'<>@]+\Z"
    )


def _mask_value(match: regex.Match[str]) -> str:
    value = match.group("value")
    if value == MASK or value.strip("\"'") == MASK:
        return match.group(0)
    word = match.groupdict().get("word") or ""
    if "token" in word.lower() and value.strip("\"'").isdigit():  # `max_token: 4096` is a setting
        return match.group(0)
    start, end = match.span("value")
    offset = match.start()
    whole = match.group(0)
    return whole[: start - offset] + MASK + whole[end - offset :]


def redact(text: str) -> str:
    if not text:
        return text
    try:
        for rule in rules():
            if rule.kind == "token":
                text = rule.pattern.sub(MASK, text, timeout=_TIMEOUT_S)
            else:
                text = rule.pattern.sub(_mask_value, text, timeout=_TIMEOUT_S)
        text = _cut_tail().sub(MASK, text, timeout=_TIMEOUT_S)
    except TimeoutError:
        return MASK
    return text


def redact_value(value: FieldValue) -> FieldValue:
    return redact(value) if isinstance(value, str) else value


def redact_facts(facts: Mapping[str, FieldValue]) -> dict[str, FieldValue]:
    """Extracted values go into runbooks (prose and suggested commands) and the store: a peer written
    as `https://user:password@10.0.0.2` must arrive there without its password."""
    return {name: redact_value(value) for name, value in facts.items()}


def redact_diagnosis(diagnosis: Diagnosis) -> Diagnosis:
    """The same diagnosis with every quoted log text, extracted value, culprit host and free-text reason
    redacted."""
    scores = tuple(
        replace(score, evidence=tuple(replace(e, text=redact(e.text)) for e in score.evidence))
        for score in diagnosis.diagnoses
    )
    culprit: Culprit | None = diagnosis.culprit
    if culprit is not None:
        culprit = replace(
            culprit, reason=redact(culprit.reason), hosts=tuple(redact(h) for h in culprit.hosts)
        )
    reason = redact(diagnosis.no_culprit_reason) if diagnosis.no_culprit_reason else None
    return replace(
        diagnosis,
        diagnoses=scores,
        culprit=culprit,
        no_culprit_reason=reason,
        facts=redact_facts(diagnosis.facts),
    )
