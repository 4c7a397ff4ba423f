"""The README's metrics table is bot/metrics.py: every metric with its exposed name, type and labels,
and nothing that does not exist."""

from __future__ import annotations

import re

from prometheus_client.metrics import MetricWrapperBase

from bot import metrics
from tests.server.helpers import ROOT

ROW = re.compile(r"^\| `(ncclbot_\w+)` \| (\w+) \|([^|]*)\|")


def readme_metrics() -> dict[str, tuple[str, tuple[str, ...]]]:
    section = (ROOT / "README.md").read_text().split("## Operations", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if match := ROW.match(line):
            labels = tuple(re.findall(r"`(\w+)`", match.group(3)))
            rows[match.group(1)] = (match.group(2), labels)
    return rows


def defined_metrics() -> dict[str, tuple[str, tuple[str, ...]]]:
    found = {}
    for metric in vars(metrics).values():
        if isinstance(metric, MetricWrapperBase):
            exposed = metric._name + ("_total" if metric._type == "counter" else "")
            found[exposed] = (metric._type, tuple(metric._labelnames))
    return found


def test_readme_lists_every_metric_with_its_type_and_labels() -> None:
    assert readme_metrics() == defined_metrics()
