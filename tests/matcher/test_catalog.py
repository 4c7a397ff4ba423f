"""The signature catalog: every signature's own examples, class coverage, and the loader's validation."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from matcher.model import FieldValue
from matcher.reading.read import Source
from matcher.scanning.catalog import (
    DEFAULT_DIRECTORY,
    CatalogError,
    Signature,
    example_problems,
    load_catalog,
)
from matcher.scanning.prefilter import Prefilter
from matcher.scanning.scan import match_lines
from matcher.taxonomy import CLASSES, UNKNOWN

CATALOG = load_catalog()


EXAMPLE_SOURCE = Source(name="example.log", opener=lambda: io.BytesIO())


def _as_scanned(signature: Signature, example: str) -> Mapping[str, FieldValue] | None:
    """What the scanner extracts from the example: prefixes peeled, fragments and fallbacks as in a scan."""
    found = match_lines(signature, [line.encode() for line in example.split("\n")], EXAMPLE_SOURCE)
    return found[0][1] if found else None


@pytest.mark.parametrize("signature", CATALOG.signatures, ids=lambda s: s.id)
def test_signature_examples(signature: Signature) -> None:
    assert example_problems(signature, _as_scanned) == []


def _healthy_job_output() -> bytes:
    """NCCL_DEBUG=INFO collective lines and step logs of a healthy 64-rank job: numbers everywhere."""
    return b"".join(
        f"gpu-node-00{r % 8}:{4000 + r}:{4071 + r} [{r % 8}] NCCL INFO AllReduce: opCount {s:x} sendbuff "
        f"0x7f2a{s:04d}00 recvbuff 0x7f2a{s:04d}00 count 26214400 datatype 7 op 0 root 0 comm 0x7f{r:06x} "
        f"[nranks=64] stream 0x55d{r:05x}\n[rank{r}]:I1129 03:{s % 60:02d}:{r % 60:02d}.{r * 7919:06d} "
        f"{4000 + r} train.py:212] step {s} loss 2.{(s * 7919 + r) % 10000:04d} lr 3.0e-04 "
        f"tokens/s {150000 + r * 37 + s} grad_norm 0.{(s * 31 + r) % 997:03d}\n".encode()
        for r in range(64)
        for s in range(1, 60)
    )


def test_keywords_are_selective_on_healthy_output() -> None:
    """Keywords must be rare in healthy logs: a keyword like "802" or "Using" makes half a 400 MB log
    candidate lines, and the scan crawls. Every candidate line here names the keyword at fault."""
    data = _healthy_job_output()
    offenders = sorted(
        {
            f"{s.id}: {[k for k in s.keywords if k.encode() in data[c.start : c.end]]}"
            for c in Prefilter(CATALOG).lines(data)
            for s in (CATALOG.signatures[i] for i in c.signatures)
        }
    )
    assert offenders == []


def _healthy_setup_output() -> bytes:
    """What NCCL_DEBUG=INFO prints while a healthy 16-rank, 2-host communicator is set up over IB."""
    lines = []
    for r in range(16):
        head = f"gpu-node-00{r // 8}:{4000 + r}:{4100 + r} [{r % 8}] NCCL INFO"
        lines += [
            f"{head} Bootstrap : Using ib0:10.1.0.{r // 8}<0>",
            f"{head} NET/Plugin: No plugin found (libnccl-net.so), using internal implementation",
            f"{head} NET/IB : Using [0]mlx5_{r % 8}:1/IB [RO]; OOB ib0:10.1.0.{r // 8}<0>",
            f"{head} Using network IB",
            f"{head} ncclCommInitRank comm 0x55d{r:05x} rank {r} nranks 16 cudaDev {r % 8} busId {r % 8}0000"
            " commId 0x5f1c2e - Init START",
            f"{head} Channel 00/0 : {r}[{r % 8}] -> {(r + 1) % 16}[{(r + 1) % 8}] [send] "
            f"via NET/IB/{r % 8}/GDRDMA",
            f"{head} Channel 01/0 : {r}[{r % 8}] -> {(r + 1) % 16}[{(r + 1) % 8}] via P2P/IPC/read",
            f"{head} Connected all rings",
            f"{head} Connected all trees",
            f"{head} threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
            f"{head} 24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, "
            "32 p2p channels per peer",
            f"{head} ncclCommInitRank comm 0x55d{r:05x} rank {r} nranks 16 cudaDev {r % 8} busId {r % 8}0000"
            " commId 0x5f1c2e - Init COMPLETE",
        ]
    return ("\n".join(lines) + "\n").encode()


def test_healthy_nccl_setup_lines_reach_no_error_signature() -> None:
    """Root and cascade lines are never sampled away, so an error signature that the scanner's screen lets
    through on healthy setup lines (a keyword such as "IB " or "HCA" where its regex could not be screened)
    sends every such line of a setup flood through Python. Context signatures are meant to read them."""
    data = _healthy_setup_output()
    offenders = sorted(
        {
            CATALOG.signatures[i].id
            for c in Prefilter(CATALOG).candidates(data, sample_context=True)
            for i in c.signatures
            if CATALOG.signatures[i].role != "context"
        }
    )
    assert offenders == []


# A lost peer is by definition what the surviving ranks say (TAXONOMY: "this rank only lost its peer"):
# its evidence is cascade lines that win only when no root line exists anywhere in the bundle.
CASCADE_ONLY_CLASSES = {"network/peer-exit"}
# An ordinary exception is a root cause only when it came first across ranks (matcher.analysis.exits):
# no single line can say so, tracebacks of lost peers look the same.
INFERRED_CLASSES = {"application/python-exception"}


def test_every_taxonomy_class_has_a_root_signature() -> None:
    assert set(CATALOG.classes_without_root()) <= CASCADE_ONLY_CLASSES | INFERRED_CLASSES
    named = {c for s in CATALOG for c in s.classes}
    assert sorted(c for c in CLASSES if c != UNKNOWN and c not in named | INFERRED_CLASSES) == []


def test_signature_ids_are_unique_across_files() -> None:
    ids = [s.id for s in CATALOG]
    assert len(ids) == len(set(ids))


VALID = """
[[signature]]
id = "demo-line"
classes = ["cuda/oom"]
role = "root"
keywords = ["demo failure"]
pattern = '''demo failure on rank (?P<rank>\\d+)'''
description = "a demo"
match = ["[rank1]: demo failure on rank 1"]
no_match = ["demo success on rank 1"]

[signature.expect]
rank = "1"
"""


def _write(tmp_path: Path, text: str, name: str = "demo.toml") -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path


def test_valid_file_loads_and_compiles(tmp_path: Path) -> None:
    catalog = load_catalog(_write(tmp_path, VALID))
    signature = catalog.by_id("demo-line")
    assert signature.role == "root"
    assert signature.fields == {"rank"}
    assert example_problems(signature) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('classes = ["cuda/oom"]', 'classes = ["cuda/nope"]'), "unknown class 'cuda/nope'"),
        (('classes = ["cuda/oom"]', 'classes = ["unknown"]'), "unknown class 'unknown'"),
        (("(?P<rank>", "(?P<rnk>"), "unknown fields ['rnk']"),
        (("pattern = '''demo", "pattern = '''(?:demo"), "pattern does not compile"),
        (("pattern = '''demo failure on rank (?P<rank>\\d+)", "pattern = '''(?P<rank>\\d*)"), "empty string"),
        (('role = "root"', 'role = "primary"'), "bad role 'primary'"),
        (('keywords = ["demo failure"]', 'keywords = ["demo crash"]'), "no keyword occurs in match example"),
        (("on rank (?P<rank>", "on rank ((?P<rank>"), "pattern does not compile"),
        (('no_match = ["demo success on rank 1"]', ""), "missing no_match examples"),
        (('match = ["[rank1]: demo failure on rank 1"]', ""), "missing match examples"),
        (('description = "a demo"', 'description = "a demo"\ncolour = "red"'), "unknown keys ['colour']"),
        (('role = "root"', 'role = "root"\nsymptom = "collective-timeout"'), "symptom is only for cascade"),
        (('role = "root"', 'role = "root"\nweight = 3.0'), "weight must be"),
        (('rank = "1"', 'exit_code = "1"'), "expect names 'exit_code'"),
        (('role = "root"', 'role = "root"\nread = "end"'), "read must be one of ['scan', 'tail']"),
        (('role = "root"', 'role = "root"\nread = "tail"'), 'read = "tail" is for single-line'),
    ],
)
def test_invalid_signature_is_rejected_naming_file_and_id(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    old, new = change
    assert old in VALID
    with pytest.raises(CatalogError) as raised:
        load_catalog(_write(tmp_path, VALID.replace(old, new)))
    assert "demo.toml: signature 'demo-line'" in str(raised.value)
    assert message in str(raised.value)


def test_duplicate_id_across_files_is_rejected(tmp_path: Path) -> None:
    _write(tmp_path, VALID, "a.toml")
    _write(tmp_path, VALID, "b.toml")
    with pytest.raises(
        CatalogError, match=r"b\.toml: signature 'demo-line': duplicate id \(also in a\.toml\)"
    ):
        load_catalog(tmp_path)


def test_broken_toml_and_empty_directory_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="no signature files"):
        load_catalog(tmp_path)
    _write(tmp_path, "[[signature]\nid=", "bad.toml")
    with pytest.raises(CatalogError, match=r"bad\.toml: cannot read signature file"):
        load_catalog(tmp_path)


def test_example_check_catches_a_pattern_that_misses_its_example(tmp_path: Path) -> None:
    broken = VALID.replace(
        'match = ["[rank1]: demo failure on rank 1"]', 'match = ["demo failure on node 1"]'
    )
    signature = load_catalog(_write(tmp_path, broken)).by_id("demo-line")
    problems = example_problems(signature)
    assert problems and "does not match" in problems[0]


def test_example_check_catches_wrong_extraction(tmp_path: Path) -> None:
    signature = load_catalog(_write(tmp_path, VALID.replace('rank = "1"', 'rank = "2"'))).by_id("demo-line")
    assert example_problems(signature) == ["demo-line: expected rank='2', extracted '1'"]


def test_every_signature_file_names_its_upstream_source_and_versions() -> None:
    """Each file's header says where its messages come from (project file, release range): a reviewer can
    check a wording against the source, and a new release is a known place to look for changes."""
    missing = []
    for path in sorted(DEFAULT_DIRECTORY.glob("*.toml")):
        header = path.read_text(encoding="utf-8").split("[[signature]]", 1)[0]
        source = re.search(r"^# Source: (.+(?:\n#  .+)*)", header, re.MULTILINE)
        if source is None or not re.search(r"\d+\.\d+|\d\.x", source.group(1)):
            missing.append(path.name)
    assert missing == []
