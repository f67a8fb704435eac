"""storebench's verdicts and report from its measurements (the scenario runs in make bench-full)."""

from __future__ import annotations

from loadtest.reports.report import collect_machine_info
from loadtest.scenarios.storebench import SizeResult, StorageResult, _parse_args, _render, _verdicts


def _result(storage: str, *, rss: int, full: float, get: float, events: float) -> StorageResult:
    return StorageResult(
        storage,
        sync_events_per_s=events,
        modified_events_per_s=events * 2,
        daemon_sync_s=1.0,
        rss_over_empty=rss,
        stored_bytes=1000,
        objects=10,
        p50_ms={"full": [full, full * 3, full], "label": [1.0], "get": [get]},
    )


def test_the_verdicts_judge_the_largest_size_against_the_acceptance_bars() -> None:
    small = SizeResult(
        10,
        {
            "plain": _result("plain", rss=1200, full=10, get=0.1, events=20_000),
            "compressed": _result("compressed", rss=900, full=90, get=0.9, events=1),
        },
    )
    large = SizeResult(
        50,
        {
            "plain": _result("plain", rss=1200, full=10, get=0.1, events=20_000),
            "compressed": _result("compressed", rss=300, full=25, get=0.12, events=10_500),
        },
    )
    verdicts = {what.split(": ", 1)[1]: met for what, _, _, met in _verdicts([small, large])}
    assert verdicts == {
        "compressed RSS over empty ÷ JSON": True,  # 0.3
        "full list p50, compressed ÷ plain": False,  # 2.5x (the median of its rounds)
        "GET p50, compressed ÷ plain": True,  # 1.2x
        "compressed ingest, events/s (the lower of sync and MODIFIED)": True,
    }
    report = _render(
        [small, large],
        _parse_args(["--pods", "10", "50"]),
        collect_machine_info(command="storebench", loop="asyncio", cpu=None),
    )
    assert "| N = 50: full list p50, compressed ÷ plain | 2.50x | ≤ 2x | FAIL |" in report
    assert "## 10 pods" in report and "## 50 pods" in report
