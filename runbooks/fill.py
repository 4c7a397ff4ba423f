"""Fill a runbook's templates with one diagnosis' values."""

from __future__ import annotations

from collections.abc import Mapping

from matcher.model import FieldValue
from runbooks import template
from runbooks.model import DeadEnd, RenderedRunbook, Runbook, Step, Summaries
from runbooks.values import COMMAND_FALLBACKS, TEXT_FALLBACKS, command_value, prepare, text_value


def _fill_text(text: str, values: Mapping[str, str]) -> str:
    def resolve(placeholder: template.Placeholder) -> str:
        raw = values.get(placeholder.name)
        cleaned = text_value(raw) if raw is not None else None
        if cleaned is not None:
            return cleaned
        return placeholder.fallback if placeholder.fallback is not None else TEXT_FALLBACKS[placeholder.name]

    return template.fill(template.parse(text), resolve)


def _fill_command(command: str, values: Mapping[str, str]) -> str:
    def resolve(placeholder: template.Placeholder) -> str:
        raw = values.get(placeholder.name)
        word = command_value(raw) if raw is not None else None
        if word is not None:
            return word
        return (
            placeholder.fallback if placeholder.fallback is not None else COMMAND_FALLBACKS[placeholder.name]
        )

    return template.fill(template.parse(command), resolve)


def _fill_step(step: Step, values: Mapping[str, str]) -> Step:
    return Step(
        title=_fill_text(step.title, values),
        command=_fill_command(step.command, values) if step.command is not None else None,
        expect=_fill_text(step.expect, values),
    )


def fill_runbook(runbook: Runbook, facts: Mapping[str, FieldValue]) -> RenderedRunbook:
    """The runbook with every placeholder replaced by the diagnosis' value or neutral wording."""
    values = prepare(facts)
    summaries = runbook.summaries
    return RenderedRunbook(
        class_id=runbook.class_id,
        title=runbook.title,
        summaries=Summaries(
            executive=_fill_text(summaries.executive, values),
            engineer=_fill_text(summaries.engineer, values),
            oncall=_fill_text(summaries.oncall, values),
        ),
        steps=tuple(_fill_step(step, values) for step in runbook.steps),
        verify=_fill_step(runbook.verify, values),
        dead_ends=tuple(
            DeadEnd(attempt=_fill_text(d.attempt, values), why=_fill_text(d.why, values))
            for d in runbook.dead_ends
        ),
        prevention=tuple(_fill_text(item, values) for item in runbook.prevention),
        references=runbook.references,
    )
