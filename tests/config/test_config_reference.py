"""The README's configuration reference is the settings model's: a setting added, renamed or given a
new default without the README following fails here (regenerate with
`ncclbot config reference --write README.md`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.commands.config import REFERENCE_BEGIN, REFERENCE_END, reference_markdown, replace_reference
from bot.settings import ENVIRONMENT_ONLY, Settings, environment_names, load_settings
from tests.config.test_config_command import ncclbot
from tests.server.helpers import ROOT

README = ROOT / "README.md"


def readme_reference() -> str:
    text = README.read_text()
    assert REFERENCE_BEGIN in text and REFERENCE_END in text, "README lacks the reference markers"
    return text.split(REFERENCE_BEGIN + "\n", 1)[1].split(REFERENCE_END, 1)[0]


def test_readme_reference_is_generated_from_the_settings_model() -> None:
    assert readme_reference() == reference_markdown(), "run: ncclbot config reference --write README.md"


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_every_setting_is_listed_with_its_names_default_and_purpose(name: str) -> None:
    info = Settings.model_fields[name]
    assert info.description, f"Settings.{name} needs a description= (it is the README's text)"
    [row] = [line for line in reference_markdown().splitlines() if line.startswith(f"| `{name}` |")]
    for env in environment_names(name):
        assert f"`{env}`" in row


def test_environment_only_variables_are_listed() -> None:
    reference = reference_markdown()
    for variable in ENVIRONMENT_ONLY:
        assert f"| `{variable.name}` | {variable.default} |" in reference


def test_write_replaces_only_the_marked_block(tmp_path: Path) -> None:
    target = tmp_path / "README.md"
    target.write_text(f"# title\n\n{REFERENCE_BEGIN}\nOUTDATED-REFERENCE\n{REFERENCE_END}\n\n## after\n")
    result = ncclbot("config", "reference", "--write", str(target), env={})
    assert result.returncode == 0, result.stderr
    assert target.read_text() == replace_reference(target.read_text(), reference_markdown())
    assert target.read_text().startswith("# title\n\n") and target.read_text().endswith("\n\n## after\n")
    assert "OUTDATED-REFERENCE" not in target.read_text()


def test_write_refuses_a_file_without_markers(tmp_path: Path) -> None:
    target = tmp_path / "README.md"
    target.write_text("# no markers\n")
    result = ncclbot("config", "reference", "--write", str(target), env={})
    assert result.returncode == 2
    assert "markers" in result.stderr
    assert target.read_text() == "# no markers\n"


def test_the_readme_example_file_is_valid(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    section = README.read_text().split("## Configuration\n", 1)[1].split("\n## ", 1)[0]
    [example] = re.findall(r"```toml\n(.*?)```", section, re.DOTALL)
    config = tmp_path / "ncclbot.toml"
    config.write_text(example)
    monkeypatch.setenv("NCCLBOT_CONFIG", str(config))
    settings = load_settings()
    assert settings.log_format == "json" and settings.database_url is not None
