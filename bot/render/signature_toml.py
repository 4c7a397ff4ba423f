"""A signature skeleton as a TOML entry in the format of matcher/signatures/*.toml, with what is left
for the maintainer marked TODO. Every value is a valid TOML string whatever the log line held."""

from __future__ import annotations

import json

from bot.model.residue import Skeleton
from bot.render.safe_text import strip_controls


def _string(text: str) -> str:
    """A TOML literal string when the text allows one (regexes read better unescaped), else a basic
    string: JSON's escapes are TOML's."""
    if "'" not in text and "\n" not in text and text.isprintable():
        return f"'{text}'"
    return json.dumps(text, ensure_ascii=False)


def signature_toml(skeleton: Skeleton) -> str:
    template = strip_controls(skeleton.template, keep_newlines=False)
    keywords = ", ".join(_string(k) for k in skeleton.keywords)
    examples = "".join(
        f"  {_string(strip_controls(line, keep_newlines=False))},\n" for line in skeleton.match
    )
    return (
        f"# Drafted by `ncclbot residue --signature {skeleton.template_id}` from unrecognised lines.\n"
        f"# Template: {template}\n"
        "# To finish: rename the id (kebab-case, never renamed once shipped), pick the classes and role,\n"
        "# tighten the pattern and keywords, add no_match lines, move it into the class's file, then run\n"
        "#   python -m pytest tests/matcher/test_catalog.py\n"
        "\n"
        "[[signature]]\n"
        f"id = {_string(skeleton.id)}\n"
        "classes = []  # TODO: TAXONOMY ids this line supports\n"
        'role = "root"  # TODO: root | cascade | context\n'
        "weight = 1.0\n"
        f"keywords = [{keywords}]{'' if keywords else '  # TODO: a literal every line holds'}\n"
        f"pattern = {_string(skeleton.pattern)}\n"
        'description = "TODO: one sentence: what the line means."\n'
        f"match = [\n{examples}]\n"
        "no_match = []  # TODO: near misses and other classes' lines\n"
    )
