"""The home page's numbers over time (:mod:`cacheproxy.server.history`), the status document's
daemon and upstream sections, and the page drawn from them, over an in-memory informer with a
fake clock."""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cacheproxy import __version__
from cacheproxy.errors import ApiError, TransportError
from cacheproxy.kube import status
from cacheproxy.server.history import History, quantile
from cacheproxy.server.homepage import render
from cacheproxy.server.probing import WAIT_BUCKETS
from tests.support import until
from tests.unit.server.test_metrics import Rig, pod


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    rig = Rig()
    rig.lw.emit("ADDED", pod("a", "n1", app="web"))
    task = asyncio.create_task(rig.informer.run(), name="informer-under-test")
    try:
        await asyncio.wait_for(rig.informer.wait_for_sync(), 5)
        yield rig
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _forbidden(message: str) -> ApiError:
    return ApiError(status.status_body(code=403, reason="Forbidden", message=message))


def _request(rig: Rig, resource: str = "pods") -> None:
    rig.metrics.observe_request(verb="get", resource=resource, code=200, seconds=0.001)


async def test_rates_are_over_the_last_minute_and_the_window_keeps_15_minutes(rig: Rig) -> None:
    history = History(rig.metrics, window=900, step=10)
    history.sample()
    assert history.rates("pods") is None or history.rates("pods") == (0.0, 0.0)
    # 1 000 s of one change and two requests every 10 s, then a quiet minute.
    for i in range(100):
        rig.clock.now += 10
        rig.lw.emit("ADDED", pod(f"p{i}", "n1"))
        await until(lambda i=i: rig.informer.events_processed == i + 1)
        _request(rig)
        _request(rig)
        _request(rig, "configmaps")  # not tracked: counted for nothing here
        history.sample()
    changes, requests = history.rates("pods") or (-1, -1)
    assert math.isclose(changes, 0.1) and math.isclose(requests, 0.2)
    rig.clock.now += 60
    assert history.rates("pods") == (0.0, 0.0)
    series = history.series("pods")
    assert len(series) == 900 // 10 + 1 + 1  # the window's samples, and one taken now
    assert series[-1].objects == 101 and series[-1].requests == 200
    assert series[-1].at - series[0].at == 900 + 60  # the oldest kept: 15 minutes before the last


async def test_a_resource_no_longer_tracked_is_forgotten(rig: Rig) -> None:
    history = History(rig.metrics)
    history.sample()
    assert history.series("pods")
    rig.server.remove_resource(rig.resource.rtype)
    history.sample()
    assert history.series("pods") == []
    assert history.rates("pods") is None


def _exact_rank_quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@given(
    st.lists(st.floats(min_value=0, max_value=20, allow_nan=False), min_size=1, max_size=200),
    st.sampled_from([0.5, 0.9, 0.99, 1.0]),
)
def test_a_bucket_quantile_is_the_bound_of_the_exact_quantiles_bucket(
    values: list[float], q: float
) -> None:
    buckets = [0] * (len(WAIT_BUCKETS) + 1)
    for v in values:
        buckets[next((i for i, b in enumerate(WAIT_BUCKETS) if v <= b), len(WAIT_BUCKETS))] += 1
    exact = _exact_rank_quantile(values, q)
    bound = quantile(buckets, q)
    assert bound is not None
    assert exact <= bound
    lower = max((b for b in WAIT_BUCKETS if b < bound), default=-1.0)
    assert exact > lower


def test_no_reads_no_quantile() -> None:
    assert quantile([0] * (len(WAIT_BUCKETS) + 1), 0.5) is None


async def test_the_status_document_names_the_daemon_and_its_upstream(rig: Rig) -> None:
    rig.server.api_server = "https://api.example:6443"
    rig.server.version.update({"gitVersion": "v1.32.0"})
    rig.clock.now += 75
    doc = rig.server.status_page()
    assert doc["daemon"] == {"version": __version__, "uptimeSeconds": 75}
    assert doc["upstream"] == {
        "server": "https://api.example:6443",
        "version": "v1.32.0",
        "reachable": True,
        "lastError": None,
    }
    failures = rig.metrics.failures
    failures.failed("pods", "list", _forbidden("pods is forbidden: User cannot list"))
    rig.clock.now += 5
    failures.failed("nodes", "watch", TransportError("connection refused"))
    rig.clock.now += 2
    upstream = rig.server.status_page()["upstream"]
    assert upstream["reachable"] is False  # a resource's request did not reach it
    assert upstream["lastError"]["resource"] == "nodes"  # the newest streak
    assert upstream["lastError"]["sinceSeconds"] == 2
    failures.answered("nodes")
    upstream = rig.server.status_page()["upstream"]
    assert upstream["reachable"] is True
    assert upstream["lastError"]["resource"] == "pods"
    assert upstream["lastError"]["code"] == 403


async def test_the_status_document_carries_each_resources_rates(rig: Rig) -> None:
    rig.server.history.sample()
    rig.clock.now += 4
    for _ in range(8):
        _request(rig)
    pods = rig.server.status_page()["resources"]["pods"]
    assert pods["requestsPerSecond"] == 2.0
    assert pods["eventsPerSecond"] == 0.0
    assert pods["consistentReads"] is None  # the rig's resource reads as its cache is


async def test_the_page_draws_the_charts_and_says_why_a_resource_fails(rig: Rig) -> None:
    history = rig.server.history
    for i in range(5):
        rig.clock.now += 10
        for _ in range(i):
            _request(rig)
        history.sample()
    rig.metrics.failures.failed("pods", "watch", _forbidden("pods is forbidden"))
    rig.clock.now += 3
    html = render(rig.server.status_page(), version={}, api_server="", history=history).decode()
    row = re.search(r'<tr id="resource-pods">(.*?)</tr>', html, re.S)
    assert row is not None
    assert "synced, failing" in row[1]
    why = re.search(r'<tr class="failure" id="error-pods">(.*?)</tr>', html, re.S)
    assert why is not None and html.index(row[0]) < html.index(why[0])  # right under it
    assert "pods is forbidden" in why[1] and "cacheproxy rbac" in why[1]  # the fix
    assert 'id="upstream-error"' in html
    card = re.search(r'<div class="card" id="chart-pods">(.*?)</div></div>\s*$', html, re.M | re.S)
    assert card is not None
    lines = re.findall(r'<polyline points="([^"]*)"/>', card[1])
    assert len(lines) == 4  # objects, changes/s, requests/s, watchers
    objects, _, requests, _ = (line.split() for line in lines)
    assert len(objects) == 6  # five samples and now
    assert len(requests) == 4  # a rate between each two samples (not to this moment)
    xs = [float(p.split(",")[0]) for p in objects]
    assert xs == sorted(xs) and xs[-1] == 240.0
    ys = [float(p.split(",")[1]) for p in requests]
    # 1, 2, 3, 4 requests per 10 s: drawn higher (a smaller y) as they grow, the last at the top
    assert ys == sorted(ys, reverse=True) and len(set(ys)) == 4 and ys[-1] == 1.0
    assert "Last heard from upstream" in html and "Staleness" not in html
    assert "<script" not in html and "http://" not in html and "https://" not in html
