"""The real API server benchmark runs end to end on 50 pods and reports sane figures.

One run of ``python -m loadtest realserver`` at a tiny size (a real kube-apiserver, 50 pods, 20
writes per upstream transport, 2 first-sync runs, the queries briefly) is shared by the tests
below. No assertion is
about speed — the budgets are judged in the report, on the machine and size they are for: they
check that every figure is there and plausible, that the baseline saw every write, and that the
report judges every budget. Without the envtest assets they are skipped with the hint.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

import loadtest.clients.realqueries
import loadtest.harness.realcluster
import loadtest.scenarios.realserver
from cacheproxy.envtest import ASSETS_HINT
from loadtest.clients.lagprobe import lag_stats
from loadtest.clients.realqueries import WHOLE_COLLECTION
from loadtest.harness.realcluster import RESOURCES, envtest_assets
from loadtest.scenarios.realserver import main

PODS = 50
WRITES = 20
RELISTS = 2
ARGS = (
    "--pods", str(PODS), "--writes", str(WRITES), "--repeat", "2", "--relists", str(RELISTS),
    "--query-seconds", "0.02",
)  # fmt: skip
TRANSPORTS = ("HTTP/1.1", "HTTP/2")
QUERIES = ("full", "namespace", "label", "field", "get", "pages")
ITEMS = {"full": PODS, "namespace": 5, "label": 10, "field": 1, "get": 1, "pages": PODS}
"""Request 0's items: ns-0, app-0 and node-0 of 50 pods spread as loadtest.harness.realcluster does."""

Run = tuple[Path, dict[str, Any], str]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    if envtest_assets(None) is None:
        if os.environ.get("CACHEPROXY_REQUIRE_ENVTEST"):
            pytest.fail(f"CACHEPROXY_REQUIRE_ENVTEST is set but {ASSETS_HINT}")
        pytest.skip(ASSETS_HINT)
    out = tmp_path_factory.mktemp("realserver")
    with pytest.MonkeyPatch.context() as patch:
        # As above 20 000 pods: the API server is not asked whole-collection lists at 16 clients.
        patch.setattr(loadtest.clients.realqueries, "BIG_LIST_PODS", PODS - 1)
        assert main([*ARGS, "--out", str(out)]) == 0
    doc = orjson.loads((out / "realserver.json").read_bytes())
    return out, doc, (out / "realserver.md").read_text()


@pytest.mark.envtest
@pytest.mark.timeout(300)
def test_the_daemon_caches_what_the_cluster_was_given(run: Run) -> None:
    doc = run[1]
    assert doc["upstream"]["gitVersion"].startswith("v1.")
    assert doc["source"]
    assert doc["created"]["pods"] == PODS
    objects = doc["sync"]["objects"]
    assert set(objects) == set(RESOURCES)
    assert objects["pods"] == PODS
    for resource, count in doc["created"].items():
        assert objects[resource] >= count, resource  # the API server adds some of its own
    assert doc["load_s"] > 0


@pytest.mark.envtest
@pytest.mark.timeout(300)
def test_every_first_sync_figure_is_present_and_plausible(run: Run) -> None:
    sync = run[1]["sync"]
    assert len(sync["reps"]) == 2
    for rep in sync["reps"]:
        for curl in (rep["curl"], rep["curl_gzip"]):
            assert curl["status"] == 200
            assert 0 < curl["first_byte_s"] <= curl["seconds"] < 60
        assert 0 < rep["curl_gzip"]["wire_bytes"] < rep["curl"]["wire_bytes"]  # gzip
        assert 0 < rep["floor_s"] < 60
        daemon = rep["daemon"]
        assert 0 < daemon["listening_s"] < daemon["ready_s"] < 60
        assert 0 <= daemon["pods_list_s"] < daemon["ready_s"]
        assert daemon["pods_sync_how"] == "list"  # one response: the watch cache ignores limit
        assert daemon["cpu_s"] > 0
        assert 0 < daemon["rss"] <= daemon["hwm"]
    assert sync["headers"]["User-Agent"].startswith("cacheproxy/")
    assert sync["headers"]["Accept-Encoding"] == "identity"  # a loopback upstream
    assert sync["pods_responses"]["list 200"] >= 1
    assert sync["pods_responses"]["watch-list 422"] >= 1  # the refused watch-list
    assert 0 < sync["empty_rss"] < max(r["daemon"]["rss"] for r in sync["reps"])
    assert sync["stored_bytes"] > 2_000 * PODS
    assert sync["apiserver_rss"] > 0 and sync["etcd_rss"] > 0


@pytest.mark.envtest
@pytest.mark.timeout(300)
def test_every_write_is_timed_three_ways_over_both_transports(run: Run) -> None:
    doc = run[1]
    assert [r["transport"] for r in doc["lag"]] == list(TRANSPORTS)
    for r in doc["lag"]:
        assert r["writes"] == WRITES
        assert sum(r["by_verb"].values()) == WRITES
        assert set(r["by_verb"]) == {"create configmap", "patch configmap", "patch pod"}
        assert r["write_rate"] > 0
        for source, lags in r["lags"].items():
            stats = r["stats"][source]
            assert len(lags) == WRITES
            assert stats["seen"] == sum(x is not None for x in lags) <= WRITES
            assert all(x is None or -1 < x <= 5 for x in lags), source
        direct = r["stats"]["direct"]
        assert direct["seen"] == WRITES, r["errors"]  # the baseline sees every write
        assert direct["p50"] <= direct["p99"] <= direct["max"]
        assert r["polls"] >= r["stats"]["get"]["seen"]
    h1 = doc["lag"][0]
    for source in ("watch", "get"):
        assert h1["stats"][source]["seen"] == WRITES, (source, h1["errors"])
    connections = {t: d["connections"] for t, d in doc["lag_daemons"].items()}
    assert connections["HTTP/1.1"] >= len(RESOURCES)  # a connection per watch
    assert 1 <= connections["HTTP/2"] < connections["HTTP/1.1"]  # streams on one connection


@pytest.mark.envtest
@pytest.mark.timeout(300)
def test_the_report_judges_every_budget(run: Run) -> None:
    out, _, report = run
    for heading in (
        "# Real API server benchmark",
        "## Budgets",
        "## First sync",
        "## Memory",
        "## Memory across relists",
        "## Event delivery lag",
        "## Queries: the daemon beside the API server",
        "## Method",
    ):
        assert heading in report
    assert "a real kube-apiserver v1." in report
    budgets = report.split("## Budgets", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in budgets.splitlines() if line.startswith("| ") and "---" not in line]
    # The header; sync; memory per stored byte, after sync, peak; relists' peak and growth; lags;
    # the full and label lists' speed-ups, GETs/s at both RVs, the items.
    assert len(rows) == 1 + 1 + 3 + 2 + 2 * len(TRANSPORTS) + 2 + 2 + 1
    for row in rows[1:]:
        assert row.rstrip(" |").rsplit("|", 1)[1].strip() in ("PASS", "FAIL"), row
    if (out / "lag.png").exists():
        assert (out / "lag.png").read_bytes().startswith(b"\x89PNG")
        assert "![lag.png](lag.png)" in report
    if (out / "queries.png").exists():
        assert (out / "queries.png").read_bytes().startswith(b"\x89PNG")
        assert "![queries.png](queries.png)" in report


def test_without_a_kube_apiserver_it_says_why_and_skips_only_when_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(loadtest.harness.realcluster, "envtest_assets", lambda *_: None)
    assert main(["--out", str(tmp_path), "--skip-without-assets"]) == 0
    assert f"python -m loadtest realserver skipped: {ASSETS_HINT}" in capsys.readouterr().out
    assert main(["--out", str(tmp_path)]) == 2
    assert ASSETS_HINT in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_lags_not_seen_count_as_infinite() -> None:
    stats = lag_stats([0.002, None, 0.001, 0.004])
    assert (stats.writes, stats.seen, stats.missed) == (4, 3, 1)
    assert stats.p50 == 0.002
    assert stats.p99 == stats.max == math.inf
    every = lag_stats([0.003, -0.001, 0.002])
    assert (every.p50, every.max, every.missed) == (0.002, 0.003, 0)


@pytest.mark.envtest
@pytest.mark.timeout(300)
def test_each_api_server_restart_is_one_relist_with_its_memory_read(run: Run) -> None:
    relists = run[1]["relists"]
    assert [p["relists"] for p in relists["points"]] == list(range(1, RELISTS + 1))
    for point in relists["points"]:
        assert 0 <= point["recovery_s"] < 180
        assert 0 < point["rss"] <= point["hwm"]
    assert 0 < relists["after_sync_rss"] <= relists["after_sync_hwm"]
    assert "## Memory across relists" in run[2]
    assert f"RSS after relist {RELISTS} ÷ after relist 1" in run[2]


@pytest.mark.envtest
@pytest.mark.timeout(300)
def test_the_daemon_and_the_api_server_answer_every_query_with_the_same_items(run: Run) -> None:
    queries = run[1]["queries"]
    runs = {(r["query"], r["resource_version"]): r for r in queries["runs"]}
    assert set(runs) == {(q, rv) for q in QUERIES for rv in ("", "0")}
    for (query, rv), r in runs.items():
        check = r["check"]
        assert check["equal"], (query, rv, check["detail"])
        assert check["daemon_items"] == check["apiserver_items"] == ITEMS[query], (query, rv)
        assert check["daemon_pages"] == check["apiserver_pages"] == 1  # 50 pods: one page
        assert ("resourceVersion=0" in r["target"]) == (rv == "0")
    assert 0 <= queries["caught_up_s"] < 60
    assert queries["equal_at_end"]


@pytest.mark.envtest
@pytest.mark.timeout(300)
def test_every_query_figure_is_present_and_sane(run: Run) -> None:
    runs = run[1]["queries"]["runs"]
    assert len(runs) == 2 * len(QUERIES)  # each query at RV unset and "0"
    for r in runs:
        whole = (r["query"], r["resource_version"]) in WHOLE_COLLECTION
        assert set(r["throughput"]) == ({"daemon"} if whole else {"daemon", "apiserver"})
        for server in ("daemon", "apiserver"):
            one, many = r["latency"][server], r["throughput"].get(server)
            # 3 rounds, each of at least one request (of 2 unless the round's time cap ran out
            # during its first, as on a loaded machine)
            assert one["requests"] >= 3
            for t in (one, many) if many else (one,):
                assert t["errors"] == 0, (r["query"], server)
                assert 0 < t["p50"] <= t["p99"] < 10, (r["query"], server, t)
                assert t["wall_s"] > 0 and t["bytes_per_request"] > 0
                assert t["pages_per_request"] == 1
                assert t["client_cpu_s"] > 0
                # /proc's ticks may read 0 over a short batch; never more than every core for
                # the batch's wall time (a tick or two of slack for the readings).
                assert 0 <= t["server_cpu_s"] <= t["wall_s"] * (os.cpu_count() or 1) + 0.1, t
                assert t["server_rss_before"] > 0 and t["server_peak_rss"] > 0
            assert many is None or many["requests"] >= 16
        full = r["latency"]
        if r["query"] == "full":  # the daemon drops managedFields
            assert full["daemon"]["bytes_per_request"] < full["apiserver"]["bytes_per_request"]
    assert len(run[1]["queries"]["skipped"]) == len(WHOLE_COLLECTION)
    report = run[2]
    section = report.split("## Queries: the daemon beside the API server", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "**NO**" not in section
    assert "skipped here: the API server's full list, RV unset at 16 clients" in section
    assert "single GET, RV=0, 16 clients" in report.split("## Budgets", 1)[1]


def test_the_queries_are_on_unless_switched_off() -> None:
    assert loadtest.scenarios.realserver._parse_args([]).queries
    assert not loadtest.scenarios.realserver._parse_args(["--no-queries"]).queries
