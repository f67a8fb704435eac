"""loadtest.scenarios.warmrestart's pure parts: the daemon's metrics read by resource, and the report's
verdicts (the run itself needs a real API server: loadtest/results/*-warm-restart/)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from loadtest.scenarios.warmrestart import _RELISTS, _REQUESTS, _by_resource, render

ROOT = Path(__file__).resolve().parents[3]

METRICS = """\
cacheproxy_upstream_requests_total{resource="pods",verb="list"} 0.0
cacheproxy_upstream_requests_total{resource="pods",verb="watch"} 1.0
cacheproxy_upstream_requests_total{resource="configmaps",verb="list"} 2.0
cacheproxy_informer_relists_total{reason="expired",resource="pods"} 1.0
cacheproxy_informer_relists_total{reason="watch-error",resource="pods"} 3.0
"""


def test_metrics_are_read_by_resource_and_zeros_left_out() -> None:
    assert _by_resource(_REQUESTS, METRICS, verb="list") == {"configmaps": 2}
    assert _by_resource(_REQUESTS, METRICS, verb="watch") == {"pods": 1}
    assert _by_resource(_RELISTS, METRICS, reason="expired") == {"pods": 1}


def test_the_committed_report_renders_with_its_verdicts() -> None:
    result: dict[str, Any] = json.loads(
        (ROOT / "loadtest/results/2026-12-01-warm-restart/warmrestart.json").read_text()
    )
    machine = SimpleNamespace(
        command="python -m loadtest warmrestart", date="d", python="CPython", nproc=2, cpu_model="x"
    )
    report = render(result, machine=machine, pods=10_000)
    assert report.count("| met |") == 4
    assert "MISSED" not in report
