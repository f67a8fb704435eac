"""The pass-through benchmark runs end to end at a tiny size against a real kube-apiserver.

One short run of ``python -m loadtest passthroughbench`` (2 clients, one round of 0.05 s per side,
6 watched writes) is shared by the tests below. Nothing is about speed: every figure is there,
every request was answered, the forwarded answers are the API server's and the watch through
cacheproxy delivered every write. Without the envtest assets they are skipped with the hint.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

import loadtest.harness.realcluster
from cacheproxy.envtest import ASSETS_HINT
from loadtest.harness.realcluster import envtest_assets
from loadtest.scenarios.passthroughbench import OPERATIONS, main

ARGS = ("--seconds", "0.05", "--rounds", "1", "--warmup", "0.05", "--clients", "2")
WRITES = 6

Run = tuple[dict[str, Any], str]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    if envtest_assets(None) is None:
        if os.environ.get("CACHEPROXY_REQUIRE_ENVTEST"):
            pytest.fail(f"CACHEPROXY_REQUIRE_ENVTEST is set but {ASSETS_HINT}")
        pytest.skip(ASSETS_HINT)
    out = tmp_path_factory.mktemp("passthrough")
    assert main([*ARGS, "--watch-writes", str(WRITES), "--out", str(out)]) == 0
    doc = orjson.loads((out / "passthrough.json").read_bytes())
    return doc, (out / "passthrough.md").read_text()


@pytest.mark.envtest
@pytest.mark.timeout(120)
def test_every_operation_is_timed_both_ways_without_errors(run: Run) -> None:
    doc = run[0]
    assert [op["key"] for op in doc["operations"]] == [op.key for op in OPERATIONS]
    for op in doc["operations"]:
        for runs in (op["latency"], op["throughput"]):
            assert set(runs) == {"cacheproxy", "direct"}
            for side, t in runs.items():
                assert t["errors"] == 0, (op["key"], side, t["first_error"])
                assert t["requests"] >= 1
                assert 0 < t["p50_ms"] <= t["p99_ms"] < 10_000
                assert math.isfinite(t["daemon_cpu_s"])


@pytest.mark.envtest
@pytest.mark.timeout(120)
def test_forwarded_answers_are_the_api_servers(run: Run) -> None:
    answers = run[0]["answers"]
    assert [a["direct_status"] for a in answers] == [200, 404, 200, 409]
    for answer in answers:
        assert answer["equal"], answer


@pytest.mark.envtest
@pytest.mark.timeout(120)
def test_the_watch_through_cacheproxy_delivers_every_write(run: Run) -> None:
    doc, report = run
    watch = doc["watch"]
    assert watch["delivered"] == {"cacheproxy": WRITES, "direct": WRITES}, watch["problems"]
    assert watch["same_as_direct"]
    assert f"delivered through cacheproxy: {WRITES} of {WRITES}" in report
    for heading in ("## Summary", "## Watch of an uncached resource", "## Every batch"):
        assert heading in report


def test_without_a_kube_apiserver_it_says_why_and_skips_only_when_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(loadtest.harness.realcluster, "envtest_assets", lambda *_: None)
    assert main(["--out", str(tmp_path), "--skip-without-assets"]) == 0
    assert f"python -m loadtest passthroughbench skipped: {ASSETS_HINT}" in capsys.readouterr().out
    assert main(["--out", str(tmp_path)]) == 2
    assert ASSETS_HINT in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
