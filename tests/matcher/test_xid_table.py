"""Every code of NVIDIA's Xid catalog has one kind in rules.toml, and the Xid signatures read each kind as the
table says: application faults weakly (with the illegal access they accompany), memory / NVLink / bus /
firmware faults strongly, the rest as a driver/GPU problem worth checking, test messages as no fault."""

from __future__ import annotations

import io
import tomllib

import pytest

from matcher.reading.read import ReadLimits, iter_sources
from matcher.rules import RULES_FILE, rules
from matcher.scanning.catalog import load_catalog
from matcher.scanning.scan import scan

CATALOG_CODES = range(1, 173)  # the Ampere+ catalog, codes 1-172

SIGNATURE_OF_KIND = {
    "application": "xid-application",
    "memory": "xid-hardware",
    "nvlink": "xid-hardware",
    "bus": "xid-hardware",
    "firmware": "xid-hardware",
    "engine": "xid-other",
    "driver": "xid-other",
    "power": "xid-other",
    "legacy": "xid-other",
    "informational": "xid-informational",
}


def xid_signatures(code: int) -> set[str]:
    line = f"Mar 14 03:11:40 gpu-n17 kernel: NVRM: Xid (PCI:0000:3b:00): {code}, pid=28871, name=python\n"
    limits = ReadLimits()
    result = scan(iter_sources(["-"], limits, stdin=io.BytesIO(line.encode())), load_catalog(), limits)
    return {o.signature for o in result.observations if o.signature.startswith("xid-")}


def test_every_catalogued_xid_has_exactly_one_kind() -> None:
    table = tomllib.loads(RULES_FILE.read_text(encoding="utf-8"))["xids"]
    listed = [code for codes in table.values() for code in codes]
    assert sorted(listed) == list(CATALOG_CODES)
    assert set(table) == set(SIGNATURE_OF_KIND)


@pytest.mark.parametrize("code", CATALOG_CODES)
def test_each_xid_is_read_by_the_signature_of_its_kind(code: int) -> None:
    kind = rules().xid_kinds[code]
    assert xid_signatures(code) == {SIGNATURE_OF_KIND[kind]}, f"Xid {code} is of kind {kind}"


def test_an_xid_beyond_the_catalog_is_still_a_driver_gpu_problem() -> None:
    assert xid_signatures(173) == {"xid-other"}
