"""The scaling benchmark's growth check: the fitted exponent, its verdict, and the report and
charts drawn from a run's points."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from loadtest.clients.fanout import FanoutPoint
from loadtest.clients.listbench import Measurement
from loadtest.harness.scale_records import IngestReading, RelistTiming, ScalePoint, ScaleResult
from loadtest.reports.report import collect_machine_info
from loadtest.reports.scale_report import (
    growth,
    growth_exponent,
    judge,
    local_exponents,
    render_scale_report,
    write_charts,
)

PODS = [10_000, 25_000, 50_000, 100_000, 200_000]


@pytest.mark.parametrize(
    ("cost", "k"),
    [
        (lambda n: 3e-5 * n, 1.0),  # linear
        (lambda n: 0.4, 0.0),  # constant
        (lambda n: 1e-9 * n * n, 2.0),  # quadratic
        (lambda n: 0.01 * math.sqrt(n), 0.5),
        (lambda n: 2e-6 * n * math.log(n), None),  # N log N: a little above 1
    ],
)
def test_the_exponent_of_a_power_law_is_its_power(cost: object, k: float | None) -> None:
    assert callable(cost)
    fitted = growth_exponent(PODS, [cost(n) for n in PODS])
    if k is None:
        assert 1.05 < fitted < 1.15
    else:
        assert fitted == pytest.approx(k, abs=1e-9)


def test_noise_around_a_line_fits_close_to_one() -> None:
    noise = [1.08, 0.93, 1.05, 0.97, 1.02]
    assert growth_exponent(PODS, [5e-4 * n * e for n, e in zip(PODS, noise, strict=True)]) == (
        pytest.approx(1.0, abs=0.05)
    )


def test_unusable_points_are_left_out_and_too_few_give_no_fit() -> None:
    linear = [n / 1000 for n in PODS]
    linear[2] = math.nan
    linear[3] = 0.0
    assert growth_exponent(PODS, linear) == pytest.approx(1.0)
    assert math.isnan(growth_exponent([10_000], [1.0]))
    assert math.isnan(growth_exponent([10_000, 10_000], [1.0, 2.0]))
    assert math.isnan(growth_exponent([10_000, 20_000], [math.nan, 2.0]))


def test_local_exponents_show_where_a_curve_bends() -> None:
    costs = [1.0, 2.5, 5.0, 40.0]  # linear, then cubic from 50 000 to 100 000
    assert local_exponents(PODS[:4], costs) == pytest.approx([1.0, 1.0, 3.0])
    assert local_exponents(PODS[:1], costs[:1]) == []


@pytest.mark.parametrize(
    ("k", "growth_class", "verdict"),
    [
        (1.1, "linear", "PASS"),
        (1.11, "linear", "FAIL"),
        (0.2, "flat", "PASS"),
        (0.25, "flat", "FAIL"),
        (-0.3, "flat", "PASS"),
        (math.nan, "linear", "n/a"),
    ],
)
def test_a_verdict_compares_the_exponent_with_its_class_bound(
    k: float, growth_class: str, verdict: str
) -> None:
    assert judge(k, growth_class) == verdict  # type: ignore[arg-type]


def _point(n: int) -> ScalePoint:
    """Costs as they should grow: whole-collection ones linear, the rest constant."""
    mib = 1 << 20
    lists = [
        Measurement("daemon", "full", 1, 3, 0, 1.0, (n * 2e-6,) * 3, n * 5000.0),
        Measurement("daemon", "label", 1, 20, 0, 1.0, (0.004,) * 20, 500 * 5000.0),
        Measurement("daemon", "field", 1, 20, 0, 1.0, (0.004,) * 20, 500 * 5000.0),
        Measurement("daemon", "get", 1, 20, 0, 1.0, (0.0002,) * 20, 5000.0),
    ]
    fanout = [
        FanoutPoint(
            target="daemon",
            watchers=w,
            rate=20.0,
            duration=5.0,
            events=100,
            write_rate=20.0,
            expected=100 * w,
            delivered=100 * w,
            lag_p50=0.003,
            lag_p99=0.02,
            lag_max=0.05,
            evicted=0,
            closed=0,
            failed=0,
            client_procs=1,
            client_cpu_s=0.1,
            server_cpu_s=0.1,
            sim_cpu_s=0.1,
            wall_s=5.0,
        )
        for w in (100, 1000)
    ]
    return ScalePoint(
        pods=n,
        storage="plain",
        selected=500,
        sim_start_s=n / 2000,
        sim_rss=n * 60_000,
        start_s=0.9,
        sync_s=n / 20_000,
        objects=n,
        stored_bytes=n * 5000,
        rss=90 * mib + n * 7000,
        rss_empty=90 * mib,
        hwm=200 * mib + n * 8000,
        rss_before_relists=150 * mib + n * 7000,
        relist_peak=150 * mib + n * 14_000,
        items={"full": n, "label": 500, "field": 500, "get": 1},
        lists=lists,
        ingest=[
            IngestReading(
                writes=5000,
                write_rate=1000.0,
                early=0,
                applied=5000,
                burst_s=cpu * 1.1,
                daemon_cpu_s=cpu,
                sim_cpu_s=0.1,
            )
            for cpu in (0.45, 0.4, 0.35)
        ],
        fanout=fanout,
        relists=[RelistTiming(seconds=n / 25_000, total_s=n / 25_000 + 1.2)],
    )


def _result(pods: list[int]) -> ScaleResult:
    machine = collect_machine_info(command="python -m loadtest scale", loop="uvloop", cpu=None)
    return ScaleResult(machine=machine, points=[_point(n) for n in pods], settings={})


def test_costs_that_grow_as_they_should_pass_every_check() -> None:
    rows = growth(_result(PODS))
    assert [r["cost"] for r in rows] == [
        "rss", "relist-memory", "first-sync", "relist", "full-list", "label-list", "field-list",
        "get", "ingest", "watch-100", "watch-1000",
    ]  # fmt: skip
    for row in rows:
        assert row["verdict"] == "PASS", row
        expected = 1.0 if row["expected"] == "linear" else 0.0
        assert row["k"] == pytest.approx(expected, abs=0.01), row
    assert next(r for r in rows if r["cost"] == "ingest")["values"] == [80.0] * 5  # µs/event


def test_the_report_has_a_growth_row_per_cost_and_a_table_per_n(tmp_path: Path) -> None:
    result = _result(PODS[:2])
    charts = write_charts(result, tmp_path)
    assert len(charts) == 11
    for chart in charts:
        assert (tmp_path / chart).read_bytes().startswith(b"\x89PNG")
    report = render_scale_report(result, charts=charts)
    assert "| cost | storage | N = 10 000 | N = 25 000 | k | local k | expected | verdict |" in (
        report
    )
    assert "| RSS over an empty daemon (MiB) | plain | 66.8 | 167 | 1.00 | 1.00 |" in report
    assert "| single GET p50 (ms) | plain | 0.2 | 0.2 | 0.00 | 0.00 | flat: k ≤ 0.2 | PASS |" in (
        report
    )
    assert "## 10 000 pods, plain" in report and "## 25 000 pods, plain" in report
    assert "![relist.png](relist.png)" in report
