"""Secrets out of evidence: log lines quoted in a diagnosis are printed, stored and (later) posted to chat,
and training logs often echo environment dumps, launch commands and URLs with credentials in them.

`redact(text)` replaces what looks like a credential with `[REDACTED]` and keeps everything around it, so
the evidence still reads. Patterns are deliberately specific (known token formats, `KEY=value` where the
key names a secret): ordinary numbers, ids and addresses in NCCL lines must survive untouched.
"""

from __future__ import annotations

from dataclasses import replace

import regex

from matcher.model import Culprit, Diagnosis

MASK = "[REDACTED]"

# Token formats that are secret wherever they appear.
_TOKENS = regex.compile(
    r"""
    \b(?:AKIA|ASIA)[0-9A-Z]{16}\b                       # AWS access key id
  | \bgh[pousr]_[A-Za-z0-9]{30,}\b                      # GitHub tokens
  | \bgithub_pat_[A-Za-z0-9_]{20,}\b
  | \bxox[abprs]-[A-Za-z0-9-]{10,}                      # Slack tokens
  | hooks\.slack\.com/services/[A-Za-z0-9/]+            # Slack incoming webhooks
  | \bhf_[A-Za-z0-9]{30,}\b                             # Hugging Face
  | \bsk-(?:proj-)?[A-Za-z0-9_-]{20,}                   # OpenAI-style API keys
  | \beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}   # JWTs
  | -----BEGIN[A-Z ]*PRIVATE\ KEY-----.*?(?:-----END[A-Z ]*PRIVATE\ KEY-----|$)
    """,
    regex.VERBOSE,
)

# `NAME=value` / `name: value` where NAME says it holds a secret; the name stays, the value goes.
_ASSIGNMENTS = regex.compile(
    r"""(?<![A-Za-z0-9])
    (?P<key>[A-Za-z0-9_.-]*(?:PASSWORD|PASSWD|SECRET|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH_?TOKEN|_TOKEN|TOKEN)
       ["']?\s*[=:]\s*)
    (?P<value>"[^"]{6,}"|'[^']{6,}'|[^\s"',;]{6,})""",
    regex.VERBOSE | regex.IGNORECASE,
)

_BEARER = regex.compile(r"(?i)\b(?P<key>(?:Bearer|Basic)\s+)(?P<value>[A-Za-z0-9._~+/=-]{12,})")
_URL_PASSWORD = regex.compile(r"(?P<key>\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)(?P<value>[^@\s/]+)(?=@)")

# A regex timeout per pattern keeps a hostile line from stalling the diagnosis; on timeout the whole
# line is masked rather than shown unredacted.
_TIMEOUT_S = 0.05


def _mask_value(match: regex.Match[str]) -> str:
    value = match.group("value")
    if value.strip("\"'").isdigit():  # `max_tokens: 4096` is a setting, not a secret
        return match.group(0)
    return match.group("key") + MASK


def redact(text: str) -> str:
    try:
        text = _TOKENS.sub(MASK, text, timeout=_TIMEOUT_S)
        for pattern in (_ASSIGNMENTS, _BEARER, _URL_PASSWORD):
            text = pattern.sub(_mask_value, text, timeout=_TIMEOUT_S)
    except TimeoutError:
        return MASK
    return text


def redact_diagnosis(diagnosis: Diagnosis) -> Diagnosis:
    """The same diagnosis with every quoted log text and free-text reason redacted."""
    scores = tuple(
        replace(score, evidence=tuple(replace(e, text=redact(e.text)) for e in score.evidence))
        for score in diagnosis.diagnoses
    )
    culprit: Culprit | None = diagnosis.culprit
    if culprit is not None:
        culprit = replace(culprit, reason=redact(culprit.reason))
    reason = redact(diagnosis.no_culprit_reason) if diagnosis.no_culprit_reason else None
    return replace(diagnosis, diagnoses=scores, culprit=culprit, no_culprit_reason=reason)
