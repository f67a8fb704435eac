"""The consistent-read benchmark's summary judges its budget from the run's figures: the ratio
to the API server, and probes and listings within the rate (rate x seconds + 1, the rate spacing
their starts); a summary is written again from a run's JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from loadtest.scenarios.consistentbench import (
    QUIET,
    BenchResult,
    ProbeCost,
    Throughput,
    _report,
    main,
)


def result(*, apiserver: float, consistent: float, probes: float) -> BenchResult:
    def run(per_second: float, **daemon: float) -> Throughput:
        return Throughput(int(per_second * 5), 5.0, per_second, 0, 10.0, daemon)

    runs = {
        "apiserver, RV unset": run(apiserver),
        "daemon, RV unset (consistent)": run(consistent, probes=probes, listings=0.0),
        "daemon, RV=0": run(1000.0),
        QUIET: run(90.0, probes=20.0, listings=3.0, confirmed=40.0),
    }
    return BenchResult(
        command="python -m loadtest consistentbench",
        pods=10,
        clients=16,
        writes_per_second=20.0,
        probe_rate=10,
        probe_cost={"limit=1 (the daemon's probe)": ProbeCost(1.0, 1.0, 100)},
        throughput=runs,
        ratio_consistent_to_apiserver=consistent / apiserver,
        probes_per_second=probes / 5.0,
        listings_per_second=0.0,
        quiet_ratio_to_apiserver=90.0 / apiserver,
        quiet_listings_per_second=0.6,
    )


@pytest.mark.parametrize(
    ("apiserver", "consistent", "probes", "verdict"),
    [
        (3.0, 159.0, 51.0, "All met: yes"),
        (30.0, 159.0, 51.0, "All met: no"),  # 5.3x
        (3.0, 159.0, 52.0, "All met: no"),  # one probe more than 10 x 5 s + 1
    ],
)
def test_the_summary_judges_the_ratio_and_the_probe_rate(
    apiserver: float, consistent: float, probes: float, verdict: str
) -> None:
    assert verdict in _report(result(apiserver=apiserver, consistent=consistent, probes=probes))


def test_a_summary_is_written_again_from_a_runs_json(tmp_path: Path) -> None:
    path = tmp_path / "consistentbench.json"
    path.write_text(json.dumps(asdict(result(apiserver=3.0, consistent=159.0, probes=51.0))))
    assert main(["--report-from", str(path)]) == 0
    summary = (tmp_path / "consistentbench.md").read_text()
    assert "| consistent label lists ÷ the API server's (≥ 10x) | 53.0x | met |" in summary
    assert "| 51 (10.2/s) | met |" in summary
