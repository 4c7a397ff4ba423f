"""Untrusted text made safe to show and store: secrets out, terminal control characters out.

Log lines quoted in a diagnosis are printed, stored and posted to chat, and training logs often echo
environment dumps, launch commands and URLs with credentials in them.

`redact(text)` replaces what looks like a credential with `[REDACTED]` and keeps everything around it, so
the evidence still reads. The rules are data (`secrets.toml`: known token formats, `KEY=value` where the
key names a secret, `--password x`, URL userinfo and signatures), each with examples that must be masked
and ordinary lines that must survive; a test runs them all.

Redaction must run on the whole text before any cut: a token cut in half by an excerpt limit no longer
looks like a token. `redact` also masks a token *prefix* that ends the text (`...ghp_abc`), because texts
that reach it may already have been capped by the reader.

`strip_controls(text)` is the one function every renderer (terminal text, JSON, Slack) and the store use
for control characters: escape sequences, C0/C1 controls, bidi overrides and other invisible format
characters. Log text, host names and file names can carry any of them.
"""

from __future__ import annotations

import tomllib
import unicodedata
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


# Whole escape sequences go, not just their ESC: CSI (7-bit and the C1 byte 0x9b), OSC (title, hyperlink)
# up to BEL or ST, and the two-character escapes.
_ESCAPES = regex.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[ -~]?"
)


def strip_controls(text: str, keep: str = "\t") -> str:
    """`text` without terminal escape sequences and invisible control characters.

    Controls (C0, DEL, C1) and line/paragraph separators become a space, so words stay apart; format
    characters (bidi embeddings, overrides and isolates, zero-width characters, BOM) are removed, so a
    name cannot display reversed; lone surrogates (undecodable bytes) become U+FFFD. Characters in `keep`
    (by default the tab; pass "\t\n" for multi-line text) are left alone.
    """
    if text.isprintable():  # the common case, answered in C
        return text
    text = _ESCAPES.sub("", text)
    out = []
    for char in text:
        if char.isprintable() or char in keep:
            out.append(char)
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Zl", "Zp"):
            out.append(" ")
        elif category == "Cs":
            out.append("\ufffd")
        elif category == "Cf":
            continue
        else:  # other separators (no-break space), private use, unassigned: visible or harmless
            out.append(char)
    return "".join(out)


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


def clean(text: str) -> str:
    """Secrets masked and control characters removed: what may be shown or stored of untrusted text."""
    return strip_controls(redact(text))


def clean_value(value: FieldValue) -> FieldValue:
    return clean(value) if isinstance(value, str) else value


def redact_diagnosis(diagnosis: Diagnosis) -> Diagnosis:
    """The same diagnosis with every quoted log text, extracted value, culprit host and free-text reason
    redacted and stripped of control characters (a host name with an escape sequence or a bidi override
    in it is not a host name)."""
    scores = tuple(
        replace(score, evidence=tuple(replace(e, text=clean(e.text)) for e in score.evidence))
        for score in diagnosis.diagnoses
    )
    culprit: Culprit | None = diagnosis.culprit
    if culprit is not None:
        culprit = replace(culprit, reason=clean(culprit.reason), hosts=tuple(clean(h) for h in culprit.hosts))
    reason = clean(diagnosis.no_culprit_reason) if diagnosis.no_culprit_reason else None
    return replace(
        diagnosis,
        diagnoses=scores,
        culprit=culprit,
        no_culprit_reason=reason,
        # Extracted values go into runbooks (prose and suggested commands) and the store: a peer written
        # as `https://user:password@10.0.0.2` must arrive there without its password.
        facts={name: clean_value(value) for name, value in diagnosis.facts.items()},
    )
