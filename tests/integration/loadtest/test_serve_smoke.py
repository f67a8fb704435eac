"""The serving benchmark runs end to end on 50 pods and reports sane, consistent numbers.

One run of ``python -m loadtest serve`` at the smallest useful size (every server a real process
on 127.0.0.1, 5 watchers, a second of writes) is shared by the tests below. No assertion is
about speed: they check that every server answered every scenario with the same items, that
every measurement has finite latencies, that the daemon made no upstream request for client
requests, that every watch event reached every watcher with a plausible lag, and that the report
judges every budget.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from cacheproxy.sim.workload.democluster import DemoSpec, demo_objects
from loadtest.clients.fanout import FanoutPoint, percentile
from loadtest.clients.httpclient import ChunkedDecoder, LineSplitter, continue_token
from loadtest.scenarios.serve import main

PODS = 50
ARGS = (
    "--pods", str(PODS), "--namespaces", "5", "--apps", "5", "--nodes", "5",
    "--list-seconds", "0.05", "--watchers", "5", "--rates", "20",
    "--fanout-seconds", "1", "--drain-seconds", "3",
)  # fmt: skip
SCENARIOS = ("full", "namespace", "label", "field", "get", "pages")
SERVERS = ("daemon", "simulator", "naive")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    out = tmp_path_factory.mktemp("serve")
    code = main([*ARGS, "--out", str(out)])
    assert code == 0
    doc = orjson.loads((out / "serve.json").read_bytes())
    return out, doc, (out / "serve.md").read_text()


def test_every_server_answers_every_scenario_with_the_same_items(
    run: tuple[Path, dict[str, Any], str],
) -> None:
    (size,) = run[1]["sizes"]
    assert size["pods"] == PODS
    # the demo's pods on node-0 (the field scenario's first node): 10, less an unschedulable pod
    # of the demo's stories that landed in its slot
    demo = demo_objects(DemoSpec(pods=PODS, namespaces=5, nodes=5, apps=5, seed=1))
    on_node_0 = sum(1 for r, o in demo if r == "pods" and o["spec"].get("nodeName") == "node-0")
    assert on_node_0 in (9, 10)
    expected = {
        "full": PODS, "namespace": 10, "label": 10, "field": on_node_0, "get": 1, "pages": PODS
    }  # fmt: skip
    for server in SERVERS:
        assert size["items"][server] == expected, server


def test_every_measurement_is_complete_and_finite(run: tuple[Path, dict[str, Any], str]) -> None:
    (size,) = run[1]["sizes"]
    seen = {(m["server"], m["scenario"], m["concurrency"]) for m in size["measurements"]}
    assert seen == {(s, k, c) for s in SERVERS for k in SCENARIOS for c in (1, 16)}
    for m in [*size["measurements"], *size["floor"]]:
        assert m["errors"] == 0, m
        assert m["requests"] >= m["concurrency"], m
        assert 0 < m["p50"] <= m["p99"] < 10, m
        assert m["rate"] > 0, m
        assert m["bytes_per_request"] > 0, m
    assert {(m["server"], m["scenario"], m["concurrency"]) for m in size["floor"]} == {
        ("floor", k, c) for k in ("full", "label", "field") for c in (1, 16)
    }
    full = next(
        m for m in size["measurements"] if m["scenario"] == "full" and m["server"] == "daemon"
    )
    floor = next(m for m in size["floor"] if m["concurrency"] == 1 and m["scenario"] == "full")
    assert floor["bytes_per_request"] == full["bytes_per_request"]  # the very same bytes


def test_memory_and_offload_readings_are_plausible(run: tuple[Path, dict[str, Any], str]) -> None:
    (size,) = run[1]["sizes"]
    memory = size["memory"]
    assert memory["objects"] == PODS
    assert 2_000 < memory["stored_bytes"] / PODS < 20_000  # demo pods, managedFields dropped
    assert size["sim_item_bytes"] > memory["stored_bytes"] / PODS  # the simulator keeps them
    assert 0 < memory["rss_empty"] <= memory["hwm"]
    assert memory["rss"] > 0
    phases = size["offload"]["phases"]
    assert [p["client_requests"] for p in phases] == [10, 1000]
    assert [p["upstream_requests"] for p in phases] == [0, 0]
    assert size["offload"]["run_client_requests"] > 1000
    assert 1 <= size["offload"]["run_upstream_requests"] <= 3


def test_every_watch_event_reaches_every_watcher(run: tuple[Path, dict[str, Any], str]) -> None:
    points = run[1]["fanout"]
    assert [(p["target"], p["watchers"], p["rate"]) for p in points] == [
        ("daemon", 5, 20.0),
        ("broadcaster", 5, 20.0),
    ]
    for p in points:
        assert p["events"] >= 15, p
        assert p["expected"] == p["events"] * 5, p
        assert p["delivered"] == p["expected"], p
        assert p["evicted"] == p["closed"] == p["failed"] == 0, p
        assert 0 <= p["lag_p50"] <= p["lag_p99"] <= p["lag_max"] < 3, p
        # The watchers' CPU comes from getrusage (microseconds): reading every event used some.
        assert p["client_cpu_s"] > 0, p
        # The server's from /proc, in ticks (a tiny run may read 0): never more than the whole
        # machine was busy over the same window, a tick of slack for each of the two readings.
        assert 0 <= p["server_cpu_s"] <= p["machine_busy_s"] + 2 / os.sysconf("SC_CLK_TCK"), p


def test_report_judges_every_budget(run: tuple[Path, dict[str, Any], str]) -> None:
    out, _, report = run
    for heading in ("# Serving benchmark", "## Budgets", "## 50 pods", "## Watch fan-out"):
        assert heading in report
    budgets = report.split("## Budgets", 1)[1].split("\n## ", 1)[0]
    rows = [
        line for line in budgets.splitlines() if line.startswith("| N = 50") or "fan-out" in line
    ]
    assert len(rows) == 11  # 8 per pod count; the budget point, capacity, CPU per delivery
    for row in rows:
        assert row.rstrip(" |").rsplit("|", 1)[1].strip() in ("PASS", "FAIL", "n/a"), row
    assert "upstream pod requests" in budgets and "0 → 0" in budgets
    for chart in ("latency.png", "fanout.png"):
        assert (out / chart).read_bytes().startswith(b"\x89PNG")
        assert f"![{chart}]({chart})" in report


def test_chunked_decoding_and_line_splitting_survive_any_split() -> None:
    lines = [b'{"a":%d,"metadata":{"continue":"x"}}' % i for i in range(20)]
    payload = b"".join(line + b"\n" for line in lines)
    pieces = [payload[i : i + 7] for i in range(0, len(payload), 7)]
    framed = b"".join(b"%x\r\n%b\r\n" % (len(piece), piece) for piece in pieces)
    framed += b"0\r\n\r\n"
    for step in (1, 2, 3, 5, 64, len(framed)):
        got, ends = _decode(framed, step)
        assert got == lines, step
        assert ends[-1] and not any(ends[:-1]), step
    assert continue_token(b'{"kind":"PodList","metadata":{"continue":"abc"},"items":[') == "abc"
    assert continue_token(b'{"kind":"PodList","metadata":{},"items":[{"continue":"x"}]') == ""


def _decode(framed: bytes, step: int) -> tuple[list[bytes], list[bool]]:
    """The lines of a chunked body fed ``step`` bytes at a time, and what each feed returned."""
    got: list[bytes] = []
    decoder = ChunkedDecoder(LineSplitter(lambda b, s, e: got.append(b[s:e])).feed)
    ends = [decoder.feed(framed[i : i + step]) for i in range(0, len(framed), step)]
    return got, ends


def test_lags_of_missing_deliveries_count_as_infinite() -> None:
    assert percentile([0.1, 0.2, 0.3], 0.5) == 0.2
    assert percentile([0.1, 0.2, 0.3], 0.99, total=4) == math.inf
    assert percentile([0.1] * 99, 0.99, total=100) == 0.1
    point = FanoutPoint(
        target="daemon", watchers=2, rate=1.0, duration=1.0, events=1, write_rate=1.0,
        expected=2, delivered=1, lag_p50=0.1, lag_p99=math.inf, lag_max=math.inf, evicted=0,
        closed=0, failed=0, client_procs=1, client_cpu_s=0.0, server_cpu_s=0.0, sim_cpu_s=0.0,
        wall_s=1.0,
    )  # fmt: skip
    assert not point.sustained
