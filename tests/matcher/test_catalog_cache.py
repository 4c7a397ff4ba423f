"""The catalog start-up cache: same catalog back, keyed by content, never stale, never fatal."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from matcher.scanning import catalog as catalog_module
from matcher.scanning.catalog import DEFAULT_DIRECTORY, CatalogError, load_cached, load_catalog
from matcher.scanning.catalog_cache import ENV_CACHE_DIR, cache_directory


def _copy_of_catalog(tmp_path: Path) -> Path:
    root = tmp_path / "signatures"
    shutil.copytree(DEFAULT_DIRECTORY, root)
    return root


def _forbid_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(root: Path) -> None:
        raise AssertionError(f"parsed {root} although the cache holds it")

    monkeypatch.setattr(catalog_module, "_load", refuse)


def test_second_load_comes_from_the_cache_and_equals_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, cache = _copy_of_catalog(tmp_path), tmp_path / "cache"
    first = load_cached(root, cache)
    assert first == load_catalog(root)
    assert len(list(cache.glob("catalog-*.json"))) == 1
    _forbid_parsing(monkeypatch)
    second = load_cached(root, cache)
    assert second == first
    # Patterns compile on first use and behave as loaded.
    timeout = second.by_id("watchdog-collective-timeout")
    assert timeout.pattern.search(timeout.match[0]) is not None
    assert timeout.fields == first.by_id("watchdog-collective-timeout").fields


def test_an_edited_signature_file_is_validated_again(tmp_path: Path) -> None:
    root, cache = _copy_of_catalog(tmp_path), tmp_path / "cache"
    load_cached(root, cache)
    target = root / "cuda-oom.toml"
    text = target.read_text()
    target.write_text(text.replace('role = "root"', 'role = "primary"', 1))
    with pytest.raises(CatalogError, match="bad role 'primary'"):
        load_cached(root, cache)
    target.write_text(text.replace("[[signature]]", "# edited\n[[signature]]", 1))
    assert load_cached(root, cache) == load_catalog(root)
    assert len(list(cache.glob("catalog-*.json"))) == 2  # both versions: each may still be in use


def test_old_entries_are_pruned(tmp_path: Path) -> None:
    root, cache = _copy_of_catalog(tmp_path), tmp_path / "cache"
    target = root / "cuda-oom.toml"
    text = target.read_text()
    for version in range(7):
        target.write_text(f"# version {version}\n{text}")
        load_cached(root, cache)
    assert 1 < len(list(cache.glob("catalog-*.json"))) <= 4
    assert not list(cache.glob(".catalog-*"))  # no temporary files left behind


def test_a_damaged_cache_file_means_a_normal_load(tmp_path: Path) -> None:
    root, cache = _copy_of_catalog(tmp_path), tmp_path / "cache"
    expected = load_cached(root, cache)
    [entry] = cache.glob("catalog-*.json")
    for damage in (b"{not json", b'{"format": 1, "key": "other", "value": {}}', entry.read_bytes()[:-100]):
        entry.write_bytes(damage)
        assert load_cached(root, cache) == expected
    entry.write_bytes(entry.read_bytes().replace(b'"signatures"', b'"signatories"'))
    assert load_cached(root, cache) == expected


def test_an_unwritable_cache_folder_is_left_alone(tmp_path: Path) -> None:
    root = _copy_of_catalog(tmp_path)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    assert load_cached(root, blocked / "cache") == load_catalog(root)
    assert blocked.read_text() == "not a folder"


def test_the_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path))
    assert cache_directory() == tmp_path
    monkeypatch.setenv(ENV_CACHE_DIR, "off")
    assert cache_directory() is None
    monkeypatch.delenv(ENV_CACHE_DIR)
    assert cache_directory() is not None
