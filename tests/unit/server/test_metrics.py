"""Metrics and the status page over an in-memory SharedInformer (FakeListerWatcher)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
from collections.abc import AsyncIterator
from typing import Any, get_args

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cacheproxy.daemon.upstreammetrics import MeteredListerWatcher
from cacheproxy.errors import TransportError
from cacheproxy.informer import FakeListerWatcher, ListRequest, SharedInformer, Store, WatchRequest
from cacheproxy.informer import reflector as reflector_module
from cacheproxy.kube import status
from cacheproxy.kube.resources import builtin
from cacheproxy.server.app import CacheServer
from cacheproxy.server.metrics import RELIST_REASONS, ServerMetrics
from cacheproxy.server.resource import ServedResource
from cacheproxy.server.statuspage import cache_status
from tests.support import until

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, node: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"nodeName": node},
    }


def samples(metrics: ServerMetrics) -> Samples:
    text = metrics.exposition().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(all_samples: Samples, name: str, **labels: str) -> float | None:
    return all_samples.get((name, frozenset(labels.items())))


async def no_sleep(_: float) -> None:
    await asyncio.sleep(0)


class Rig:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.metrics = ServerMetrics(clock=self.clock)
        self.lw = FakeListerWatcher(kind="Pod")
        rtype = builtin("pods")
        self.informer = SharedInformer(
            self.lw,
            name="pods",
            store=Store(kind="Pod", api_version="v1", field_indexes=["spec.nodeName"]),
            metrics=self.metrics,
            sleep=no_sleep,
        )
        self.resource = ServedResource(rtype, self.informer, index_paths={"spec.nodeName"})
        self.server = CacheServer([self.resource], version={}, metrics=self.metrics)
        self.hub = self.server.hubs[rtype]

    def stored_bytes(self) -> int:
        return sum(len(e.raw) for e in self.informer.store.entries())


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    rig = Rig()
    rig.lw.emit("ADDED", pod("a", "n1", app="web"))
    rig.lw.emit("ADDED", pod("b", "n2", app="web"))
    task = asyncio.create_task(rig.informer.run(), name="informer-under-test")
    try:
        await asyncio.wait_for(rig.informer.wait_for_sync(), 5)
        yield rig
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_cache_gauges_follow_the_store(rig: Rig) -> None:
    s = samples(rig.metrics)
    assert value(s, "cacheproxy_cache_objects", resource="pods") == 2
    assert value(s, "cacheproxy_cache_bytes", resource="pods") == rig.stored_bytes()
    assert value(s, "cacheproxy_cache_synced", resource="pods") == 1
    assert value(s, "cacheproxy_watch_watchers", resource="pods") == 0
    for reason in ("events", "bytes", "total_bytes", "stall"):
        assert value(s, "cacheproxy_watch_evicted_total", resource="pods", reason=reason) == 0

    rig.lw.emit("ADDED", pod("c", "n1"))
    rig.lw.emit("MODIFIED", pod("a", "n3", app="web", extra="a-much-longer-label-value"))
    rig.lw.emit("DELETED", pod("b", "n2"))
    await until(lambda: rig.informer.events_processed == 3)
    s = samples(rig.metrics)
    assert value(s, "cacheproxy_cache_objects", resource="pods") == 2
    assert value(s, "cacheproxy_cache_bytes", resource="pods") == rig.stored_bytes()
    assert value(s, "cacheproxy_cache_eventlog_events", resource="pods") == 3
    for event_type, count in [("ADDED", 1), ("MODIFIED", 1), ("DELETED", 1), ("BOOKMARK", 0)]:
        assert value(s, "cacheproxy_cache_events_total", resource="pods", type=event_type) == count


async def test_staleness_counts_from_the_last_event_or_bookmark(rig: Rig) -> None:
    rig.clock.now += 7
    s = samples(rig.metrics)
    assert value(s, "cacheproxy_cache_staleness_seconds", resource="pods") == 7  # since the sync
    rig.lw.emit("ADDED", pod("c", "n1"))
    await until(lambda: rig.informer.events_processed == 1)
    rig.clock.now += 2
    assert value(samples(rig.metrics), "cacheproxy_cache_staleness_seconds", resource="pods") == 2
    rig.lw.bookmark()
    await until(lambda: rig.metrics.tracked[0].stats.events["BOOKMARK"] == 1)
    assert value(samples(rig.metrics), "cacheproxy_cache_staleness_seconds", resource="pods") == 0
    rig.clock.now += 3
    doc = cache_status(rig.metrics.tracked, ready=True, now=rig.clock())
    assert doc["resources"]["pods"]["secondsSinceLastEvent"] == 5  # bookmarks are not changes
    assert doc["resources"]["pods"]["stalenessSeconds"] == 3
    assert doc["resources"]["pods"]["state"] == "synced"  # from upstream, not from a snapshot


async def test_informer_metrics_count_requests_relists_and_watch_errors(rig: Rig) -> None:
    s = samples(rig.metrics)
    # The first sync is one watch-list, which goes on as the watch.
    assert value(s, "cacheproxy_upstream_requests_total", resource="pods", verb="watch-list") == 1
    assert value(s, "cacheproxy_upstream_requests_total", resource="pods", verb="watch") is None
    assert value(s, "cacheproxy_upstream_requests_total", resource="pods", verb="list") is None

    # A watch that saw events ends; the next one gets 410 at once: relist.
    rig.lw.emit("ADDED", pod("c", "n1"))
    await until(lambda: rig.informer.events_processed == 1)
    rig.lw.fail_next_watch(status.expired("too old resource version"))
    rig.lw.end_watches()
    await until(lambda: rig.informer.relists == 2)
    s = samples(rig.metrics)
    labels = {"resource": "pods", "reason": "expired"}
    assert value(s, "cacheproxy_informer_watch_errors_total", **labels) == 1
    assert value(s, "cacheproxy_informer_relists_total", **labels) == 1
    assert value(s, "cacheproxy_informer_events_total", resource="pods") == 1
    # The first watch-list and the relist's; the watch that got 410 between them.
    assert value(s, "cacheproxy_upstream_requests_total", resource="pods", verb="watch-list") == 2
    assert value(s, "cacheproxy_upstream_requests_total", resource="pods", verb="watch") == 1
    assert value(s, "cacheproxy_cache_bytes", resource="pods") == rig.stored_bytes()


async def test_every_relist_reason_has_a_zero_sample_before_the_first_relist(rig: Rig) -> None:
    s = samples(rig.metrics)
    for reason in RELIST_REASONS:
        labels = {"resource": "pods", "reason": reason}
        assert value(s, "cacheproxy_informer_relists_total", **labels) == 0, reason


def test_the_relist_reasons_are_the_ones_the_reflector_gives() -> None:
    assert set(get_args(reflector_module.RelistReason)) == set(RELIST_REASONS)
    source = inspect.getsource(reflector_module)
    given = set(re.findall(r'Relisting\([^()]*"([^"]+)"\)', source))
    assert given == set(RELIST_REASONS), "each reason leads to a Relisting somewhere"


async def test_evictions_are_counted_by_reason(rig: Rig) -> None:
    rig.hub.evictions.update(events=1, bytes=2, total_bytes=3, stall=4)
    s = samples(rig.metrics)
    for reason, count in [("events", 1), ("bytes", 2), ("total_bytes", 3), ("stall", 4)]:
        assert value(s, "cacheproxy_watch_evicted_total", resource="pods", reason=reason) == count
    pods = cache_status(rig.metrics.tracked, ready=rig.server.ready, now=rig.clock())
    assert pods["resources"]["pods"]["evicted"] == 10
    assert pods["resources"]["pods"]["evictedBy"]["bytes"] == 2


async def test_the_status_page_reports_each_resource(rig: Rig) -> None:
    rig.lw.emit("ADDED", pod("c", "n1"))
    await until(lambda: rig.informer.events_processed == 1)
    doc = cache_status(rig.metrics.tracked, ready=rig.server.ready, now=rig.clock())
    assert doc["ready"] is True
    pods = doc["resources"]["pods"]
    assert pods["objects"] == 3
    assert pods["bytes"] == rig.stored_bytes()
    assert pods["resourceVersion"] == str(rig.lw.rv)
    assert pods["secondsSinceLastEvent"] == 0
    assert pods["relists"] == 0
    assert pods["synced"] is True
    assert pods["phase"] == "watching"
    assert pods["watchers"] == 0
    assert pods["evicted"] == 0
    assert pods["eventLog"]["events"] == 1
    assert pods["indexes"] == [{"path": "spec.nodeName", "cardinality": 2}]


async def test_metrics_and_status_are_served_and_requests_are_counted(rig: Rig) -> None:
    transport = httpx.ASGITransport(app=rig.server)
    async with httpx.AsyncClient(transport=transport, base_url="http://cache") as client:
        assert (await client.get("/api/v1/pods")).status_code == 200
        assert (await client.get("/api/v1/namespaces/default/pods/a")).status_code == 200
        assert (await client.get("/api/v1/namespaces/default/pods/nope")).status_code == 404
        assert (await client.post("/api/v1/namespaces/default/pods", json={})).status_code == 405
        assert (await client.get("/api/v1/secrets")).status_code == 404
        page = await client.get("/status", headers={"user-agent": "curl/8.0"})
        assert page.status_code == 200
        assert page.text.startswith('{\n  "kind": "CacheStatus"')  # indented for curl
        assert page.json()["resources"]["pods"]["objects"] == 2
        scrape = await client.get("/metrics")
    assert scrape.status_code == 200
    assert scrape.headers["content-type"].startswith("text/plain; version=0.0.4")
    s = {
        (x.name, frozenset(x.labels.items())): x.value
        for family in text_string_to_metric_families(scrape.text)
        for x in family.samples
    }
    requests = "cacheproxy_http_requests_total"
    assert value(s, requests, verb="list", resource="pods", code="200") == 1
    assert value(s, requests, verb="get", resource="pods", code="200") == 1
    assert value(s, requests, verb="get", resource="pods", code="404") == 1
    assert value(s, requests, verb="create", resource="pods", code="405") == 1
    assert value(s, requests, verb="get", resource="", code="404") == 1  # not a served resource
    assert value(s, requests, verb="get", resource="", code="200") == 1  # the status page
    latency = "cacheproxy_http_request_duration_seconds_count"
    assert value(s, latency, verb="get", resource="pods", code="2xx") == 1
    assert value(s, latency, verb="get", resource="pods", code="4xx") == 1


def test_request_labels_stay_bounded() -> None:
    metrics = ServerMetrics()
    metrics.observe_request(verb="frobnicate", resource="secrets", code=299, seconds=0.1)
    metrics.observe_request(verb="watch", resource="", code=200, seconds=600)
    metrics.observe_request(verb="list", resource="", code=0, seconds=0.1)
    s = samples(metrics)
    assert value(s, "cacheproxy_http_requests_total", verb="other", resource="", code="299") == 1
    assert value(s, "cacheproxy_http_requests_total", verb="watch", resource="", code="200") == 1
    assert value(s, "cacheproxy_http_requests_total", verb="list", resource="", code="none") == 1
    durations = [k for k in s if k[0] == "cacheproxy_http_request_duration_seconds_count"]
    # Watches are counted, not timed: they last as long as the client asked.
    assert sorted(dict(labels)["verb"] for _, labels in durations) == ["list", "other"]


def test_each_instance_has_its_own_registry() -> None:
    first, second = ServerMetrics(), ServerMetrics()
    first.request("pods", "list")
    assert value(samples(first), "cacheproxy_upstream_requests_total", resource="pods", verb="list")
    assert not value(
        samples(second), "cacheproxy_upstream_requests_total", resource="pods", verb="list"
    )


async def test_the_metered_lister_watcher_reports_upstream_codes() -> None:
    metrics = ServerMetrics()
    fake = FakeListerWatcher()
    lw = MeteredListerWatcher(fake, informer="configmaps", metrics=metrics)
    await lw.list(ListRequest())
    fake.fail_next_list(status.internal_error("boom"))
    with pytest.raises(Exception, match="boom"):
        await lw.list(ListRequest())
    fake.fail_next_list(TransportError("connection reset"))
    with pytest.raises(TransportError):
        await lw.list(ListRequest())
    fake.fail_next_watch(status.expired("too old resource version"))
    with pytest.raises(Exception, match="too old"):
        async with lw.watch(WatchRequest(resource_version="1", timeout_seconds=5)):
            pass
    async with lw.watch(WatchRequest(resource_version="1", timeout_seconds=5)) as events:
        fake.emit("ADDED", {"metadata": {"name": "x", "namespace": "default"}})
        fake.end_watches()
        assert [e.type async for e in events] == ["ADDED"]
    s = samples(metrics)
    for verb, code, count in [
        ("list", "200", 1),
        ("list", "500", 1),
        ("list", "error", 1),
        ("watch", "410", 1),
        ("watch", "200", 1),
    ]:
        labels = {"resource": "configmaps", "verb": verb, "code": code}
        assert value(s, "cacheproxy_upstream_responses_total", **labels) == count, labels
