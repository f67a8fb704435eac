"""The pass-through benchmark's report: the overhead is cacheproxy's p50 less the direct p50,
flagged when over the 1 ms target, a watch that missed events says how many, and a report is
written again from a run's JSON."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson

from loadtest.reports.figures import X
from loadtest.reports.passthroughbench_report import (
    AnswerCheck,
    OperationRun,
    PassthroughResult,
    Timing,
    WatchCheck,
    load_result,
    render_report,
)
from loadtest.reports.report import collect_machine_info
from loadtest.scenarios.passthroughbench import main


def timing(p50_ms: float, rate: float) -> Timing:
    return Timing(
        requests=int(rate * 2),
        errors=0,
        wall_s=2.0,
        p50_ms=p50_ms,
        p99_ms=3 * p50_ms,
        mean_ms=p50_ms,
        daemon_cpu_s=0.5,
        client_cpu_s=0.1,
    )


def result(*, delivered: int) -> PassthroughResult:
    get = OperationRun(
        key="get",
        title="GET of a Service (not cached)",
        latency={"cacheproxy": timing(1.5, 600.0), "direct": timing(0.8, 1000.0)},
        throughput={"cacheproxy": timing(20.0, 800.0), "direct": timing(10.0, 1600.0)},
    )
    patch = dataclasses.replace(
        get,
        key="patch",
        title="merge patch of a ConfigMap",
        latency={"cacheproxy": timing(3.4, 300.0), "direct": timing(2.0, 400.0)},
    )
    return PassthroughResult(
        command="python -m loadtest passthroughbench",
        kube="v1.28.7",
        clients=16,
        rounds=3,
        seconds=2.0,
        machine=collect_machine_info(command="cmd", loop="uvloop", cpu=None),
        load_at_end="1.00 1.00 1.00",
        uptime="up",
        operations=[get, patch],
        answers=[AnswerCheck("GET /api/v1/namespaces/a/services/b", 200, 200, True)],
        watch=WatchCheck(
            resource="services",
            writes=300,
            delivered={"cacheproxy": delivered, "direct": 300},
            events={"cacheproxy": delivered, "direct": 300},
            same_as_direct=delivered == 300,
            lag_p50_ms={"cacheproxy": 0.5, "direct": 0.2},
            lag_p99_ms={"cacheproxy": 5.0, "direct": 4.0},
            write_rate=100.0,
        ),
        warmup=6.0,
        others_cores=0.5,
    )


def test_the_overhead_is_the_p50_difference_flagged_over_the_target() -> None:
    report = render_report(result(delivered=300))
    summary = report.split("## Summary", 1)[1].split("\n## ", 1)[0]
    rows = {line.split(" | ")[0]: line for line in summary.splitlines() if line.startswith("| ")}
    assert rows["| GET of a Service (not cached)"] == (
        "| GET of a Service (not cached) | 0.80 / 2.40 | 1.50 / 4.50 | +0.70 | 1 600 | 800 | "
        f"0.50{X} |"
    )
    assert "| +1.40 (over) |" in rows["| merge patch of a ConfigMap"]
    assert "**delivered through cacheproxy: 300 of 300** (every event)" in report


def test_a_watch_that_missed_events_says_how_many() -> None:
    report = render_report(result(delivered=297))
    assert "**delivered through cacheproxy: 297 of 300** (**3 events missing**)" in report
    assert "the same events in the same order: **no**" in report


def test_a_report_is_written_again_from_a_runs_json(tmp_path: Path) -> None:
    path = tmp_path / "passthrough.json"
    path.write_bytes(orjson.dumps(dataclasses.asdict(result(delivered=300))))
    assert load_result(orjson.loads(path.read_bytes())) == result(delivered=300)
    assert main(["--report-from", str(path)]) == 0
    assert (tmp_path / "passthrough.md").read_text() == render_report(result(delivered=300))
