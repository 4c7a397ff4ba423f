"""The analysis rules and the analysis version are data: checked, and versioned like grouping strategies."""

from __future__ import annotations

import tomllib

import pytest

from matcher.rules import RULES_FILE, analysis_version, digest, parse_rules, rules


def test_catalog_or_rules_change_needs_a_new_analysis_version() -> None:
    version = analysis_version()
    current = digest()
    assert version.digest == current, (
        "signatures/*.toml, rules.toml, priors.toml or next_checks.toml changed: give "
        "matcher/analysis-version.toml a new id, set base to the old one, add a changelog line and "
        f"digest = {current!r}"
    )


def test_changelog_starts_with_the_current_version_and_its_base() -> None:
    version = analysis_version()
    assert version.changelog[0].startswith(version.id + ":")
    assert version.base is not None and version.changelog[1].startswith(version.base + ":")
    assert version.id != version.base


def test_rules_name_only_taxonomy_classes() -> None:
    document = tomllib.loads(RULES_FILE.read_text(encoding="utf-8"))
    document["culprits"]["never_named"] = ["config/duplicate-gpus"]
    with pytest.raises(ValueError, match="unknown classes"):
        parse_rules(document)


def test_application_xids_are_told_apart_from_hardware_ones() -> None:
    r = rules()
    assert r.application_xid(13) and r.application_xid("43")
    assert not r.application_xid(79) and not r.application_xid(48) and not r.application_xid("n/a")
    assert r.xid_kinds[74] == "nvlink" and r.xid_kinds[94] == "memory"


@pytest.mark.parametrize(
    ("code", "name"),
    [(-9, "SIGKILL"), (137, "SIGKILL"), (-11, "SIGSEGV"), (-6, "SIGABRT"), (1, None), (0, None)],
)
def test_exit_codes_name_their_signal(code: int, name: str | None) -> None:
    assert rules().signal_name(code) == name


def test_launcher_words_for_signals() -> None:
    r = rules()
    assert r.normal_signal("Segmentation fault") == "SIGSEGV"
    assert r.normal_signal("KILL") == "SIGKILL" and r.normal_signal("SIGBUS") == "SIGBUS"
    assert r.normal_signal("Exited") is None
    assert r.signal_classes["SIGKILL"] == "system/host-oom"
