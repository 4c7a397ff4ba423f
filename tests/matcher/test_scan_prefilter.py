"""The multi-literal prefilter: both backends name the same candidate lines and signatures."""

from __future__ import annotations

import random

import pytest

from matcher.scanning import prefilter as prefilter_module
from matcher.scanning.catalog import load_catalog
from matcher.scanning.prefilter import Prefilter

CATALOG = load_catalog()
HAVE_HYPERSCAN = prefilter_module.hyperscan is not None


def _block(seed: int) -> bytes:
    """Catalog examples mixed with healthy noise and case-changed copies, in random order."""
    rng = random.Random(seed)
    lines = [line for s in CATALOG for line in (*s.match, *s.no_match) for line in line.split("\n")]
    lines += [f"[rank{r}]: step {r * 7} loss 2.{r:04d}" for r in range(300)]
    lines += [line.upper() for line in rng.sample(lines, 50)] + [
        line.lower() for line in rng.sample(lines, 50)
    ]
    rng.shuffle(lines)
    return ("\n".join(lines) + "\n").encode()


def _expected(data: bytes) -> list[tuple[bytes, tuple[int, ...]]]:
    """Reference: every line, every keyword of the scanned signatures (not the tail ones, which are read
    from each source's end), tested directly."""
    found = []
    for line in data.split(b"\n"):
        hits = []
        for index, signature in enumerate(CATALOG.signatures):
            if signature.read != "scan":
                continue
            words = [k.encode() for k in signature.keywords]
            text = line.lower() if signature.caseless else line
            if any((w.lower() if signature.caseless else w) in text for w in words):
                hits.append(index)
        if hits:
            found.append((line, tuple(hits)))
    return found


@pytest.mark.parametrize(
    "use_hyperscan",
    [
        False,
        pytest.param(True, marks=pytest.mark.skipif(not HAVE_HYPERSCAN, reason="hyperscan not installed")),
    ],
)
@pytest.mark.parametrize("seed", [1, 2])
def test_candidates_equal_a_direct_keyword_search(use_hyperscan: bool, seed: int) -> None:
    data = _block(seed)
    prefilter = Prefilter(CATALOG, use_hyperscan=use_hyperscan)
    got = [(data[c.start : c.end], c.signatures) for c in prefilter.lines(data)]
    assert got == _expected(data)


def test_lines_at_block_edges_and_without_final_newline() -> None:
    prefilter = Prefilter(CATALOG, use_hyperscan=False)
    data = b"Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000\nok\nNCCL version 2.21.5"
    lines = [data[c.start : c.end] for c in prefilter.lines(data)]
    assert lines == [data.split(b"\n")[0], b"NCCL version 2.21.5"]


def test_forcing_hyperscan_where_it_is_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefilter_module, "hyperscan", None)
    assert Prefilter(CATALOG).backend == "find"
    with pytest.raises(RuntimeError, match="hyperscan is not installed"):
        Prefilter(CATALOG, use_hyperscan=True)


def test_default_catalog_and_its_prefilter_are_built_once_and_the_cache_stays_bounded(tmp_path) -> None:
    from matcher.scanning import prefilter as scan

    assert load_catalog() is load_catalog()
    assert scan.prefilter_for(CATALOG) is scan.prefilter_for(CATALOG)
    (tmp_path / "one.toml").write_text(
        '[[signature]]\nid = "x"\nclasses = []\nrole = "context"\nkeywords = ["abc"]\npattern = "abc"\n'
        'description = "x"\nmatch = ["abc"]\nno_match = ["xyz"]\n'
    )
    for _ in range(10):
        scan.prefilter_for(load_catalog(tmp_path))
    assert len(scan._prefilters) <= scan._PREFILTER_CACHE


@pytest.mark.skipif(not HAVE_HYPERSCAN, reason="hyperscan is not installed")
def test_one_prefilter_scans_from_many_threads_at_once() -> None:
    """A server diagnoses several uploads at once over one cached catalog: scans that overlap in time
    each get the whole answer (a shared Hyperscan scratch made every overlapping scan fail)."""
    from concurrent.futures import ThreadPoolExecutor

    shared = Prefilter(CATALOG, use_hyperscan=True)
    data = _block(7) * 40  # a few MB: scans take long enough to overlap

    def scan(kind: int) -> list[tuple[int, int, tuple[int, ...]]]:
        found = shared.lines(data) if kind == 0 else shared.candidates(data, sample_context=kind == 2)
        return [(c.start, c.end, c.signatures) for c in found]

    expected = {kind: scan(kind) for kind in (0, 1, 2)}
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(scan, [kind for _ in range(12) for kind in (0, 1, 2)]))
    assert all(result == expected[index % 3] for index, result in enumerate(results))
