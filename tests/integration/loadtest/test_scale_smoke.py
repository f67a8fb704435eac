"""The scaling benchmark runs end to end at 200 and 400 pods and reports every cost's growth.

One run of ``python -m loadtest scale`` at the smallest useful sizes (the simulator and the
daemons real processes on 127.0.0.1, a burst of writes, a few watchers, two runs of each
measurement, one relist per N) is shared by the tests below. No assertion is about speed: they
check that the selected lists kept their size as N doubled, that every write and delivery
arrived, that each relist was seen, and that the report gives every cost a fitted exponent, a
verdict and a chart.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.scenarios.scale import main

PODS = (200, 400)
SELECTED = 50
ARGS = (
    "--pods", *map(str, PODS), "--selected", str(SELECTED), "--list-seconds", "0.1",
    "--heavy-requests", "1", "--ingest-writes", "200",
    "--watchers", "5", "20", "--fanout-rate", "10", "--fanout-seconds", "1",
    "--drain-seconds", "2", "--relists", "1", "--repeats", "2", "--connections", "3",
)  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    out = tmp_path_factory.mktemp("scale")
    assert main([*ARGS, "--out", str(out)]) == 0
    return out, orjson.loads((out / "scale.json").read_bytes()), (out / "scale.md").read_text()


def test_selected_lists_keep_their_size_as_the_pods_double(
    run: tuple[Path, dict[str, Any], str],
) -> None:
    points = run[1]["points"]
    assert [(p["pods"], p["storage"]) for p in points] == [(200, "plain"), (400, "plain")]
    for p in points:
        assert p["objects"] == p["items"]["full"] == p["pods"]
        # ~SELECTED each: the demo's Jobs take a few slots, an unschedulable pod has no node
        assert SELECTED * 0.7 <= p["items"]["label"] <= SELECTED * 1.3, p["items"]
        assert SELECTED * 0.7 <= p["items"]["field"] <= SELECTED * 1.3, p["items"]
        assert p["items"]["get"] == 1
        # three connections each, the full list on two (--repeats)
        assert [m["scenario"] for m in p["lists"]] == [
            *["full", "label", "field", "get"] * 2,
            "label",
            "field",
            "get",
        ]
        for m in p["lists"]:
            assert m["errors"] == 0 and m["requests"] >= 1, m
            assert 0 < m["p50"] <= m["p99"] < 10, m


def test_memory_sync_and_relists_are_read(run: tuple[Path, dict[str, Any], str]) -> None:
    for p in run[1]["points"]:
        assert 0 < p["rss_empty"] < p["rss"] <= p["hwm"], p
        assert 0 < p["rss_before_relists"] <= p["relist_peak"], p  # its owner may reset the peak
        assert p["sim_rss"] > p["stored_bytes"]  # managedFields kept, dicts beside the bytes
        assert 2_000 < p["stored_bytes"] / p["pods"] < 20_000  # demo pods, managedFields dropped
        assert 0 < p["sync_s"] < 30 and 0 < p["start_s"] < 30
        assert p["wall_s"] > p["sim_start_s"] and math.isfinite(p["other_cpu_s"])
        (relist,) = p["relists"]
        assert 0 < relist["seconds"] < relist["total_s"] < 30, relist


def test_every_write_is_applied_and_every_event_delivered(
    run: tuple[Path, dict[str, Any], str],
) -> None:
    for p in run[1]["points"]:
        assert len(p["ingest"]) == 2
        for ingest in p["ingest"]:
            assert ingest["writes"] == ingest["applied"] == 200, ingest
            assert ingest["early"] == 0, ingest  # the silent watch heard none of them
            assert ingest["daemon_cpu_s"] >= 0 and 0 < ingest["burst_s"] < 30, ingest
        assert [f["watchers"] for f in p["fanout"]] == [5, 5, 20, 20]
        for f in p["fanout"]:
            assert (
                f["events"] >= 8 and f["delivered"] == f["expected"] == f["events"] * f["watchers"]
            ), f
            assert f["evicted"] == f["closed"] == f["failed"] == 0, f
            assert 0 <= f["lag_p50"] <= f["lag_p99"] < 3, f


def test_the_report_fits_and_judges_every_cost_with_a_chart(
    run: tuple[Path, dict[str, Any], str],
) -> None:
    out, doc, report = run
    rows = doc["growth"]
    assert [r["cost"] for r in rows] == [
        "rss", "relist-memory", "first-sync", "relist", "full-list", "label-list", "field-list",
        "get", "ingest", "watch-5", "watch-20",
    ]  # fmt: skip
    for row in rows:
        assert row["pods"] == list(PODS)
        assert row["verdict"] in ("PASS", "FAIL", "n/a"), row
        if row["verdict"] != "n/a":
            assert math.isfinite(row["k"]), row
        chart = f"{row['cost']}.png"
        assert (out / chart).read_bytes().startswith(b"\x89PNG")
        assert f"![{chart}]({chart})" in report
    assert "# Scaling curve" in report and "## 400 pods, plain" in report
    assert "| full list p50 (ms) | plain |" in report
