"""The daemon's ``/metrics`` and ``/status`` in front of a simulator: after a list, a forced
relist and a watch, the numbers are the ones the cache and the simulator agree on."""

from __future__ import annotations

import asyncio

import httpx
from prometheus_client.parser import text_string_to_metric_families

from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimServer, Simulator
from tests.integration.daemon_support import daemon_for
from tests.support import until

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

INDEXES = ("spec.nodeName", "metadata.ownerReferences[*].uid")


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_metrics_and_status_after_a_list_a_relist_and_a_watch(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    resources = (ResourceConfig(rtype=builtin("pods"), indexes=INDEXES),)
    async with (
        daemon_for(demo_server.url, resources=resources) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as proxy,
        httpx.AsyncClient(base_url=demo_server.url, timeout=10) as upstream,
    ):
        assert daemon.server is not None
        served = next(iter(daemon.server.resources.values()))
        informer = served.informer

        listed = await proxy.get("/api/v1/pods")
        assert listed.status_code == 200

        # A change (so the next end of stream is not a "very short watch"), then a relist:
        # the stream ends, the next watch gets an in-stream 410 Expired.
        demo_sim.store.create(
            demo_sim.resource("pods"),
            {"metadata": {"name": "late", "namespace": "ns-0"}, "spec": {"nodeName": "node-9"}},
        )
        await until(lambda: informer.events_processed == 1)
        demo_sim.faults.fail_next("watch", 410)
        demo_sim.end_watches()
        await until(lambda: informer.relists == 2)

        truth = (await upstream.get("/api/v1/pods")).json()
        items = truth["items"]
        nodes = {i["spec"].get("nodeName") for i in items} - {None}
        owners = {o["uid"] for i in items for o in i["metadata"].get("ownerReferences", [])}
        hub = daemon.server.hubs[served.rtype]

        rv = truth["metadata"]["resourceVersion"]
        async with proxy.stream("GET", f"/api/v1/pods?watch=1&resourceVersion={rv}") as watch:
            assert watch.status_code == 200
            await until(lambda: len(hub.watchers) == 1)
            status_page = await proxy.get("/status", headers={"user-agent": "curl/8.5.0"})
            scrape = await proxy.get("/metrics")

        assert status_page.status_code == 200
        assert status_page.text.startswith("{\n  ")  # indented for a person at a terminal
        pods = status_page.json()["resources"]["pods"]
        assert pods["objects"] == len(items) == 61
        assert pods["resourceVersion"] == rv
        assert pods["watchers"] == 1
        assert pods["evicted"] == 0
        assert pods["relists"] == 1
        assert pods["synced"] is True
        assert pods["phase"] == "watching"
        assert pods["bytes"] == sum(len(e.raw) for e in served.store.entries())
        assert 0 <= pods["secondsSinceLastEvent"] < 10
        assert pods["indexes"] == [
            {"path": "spec.nodeName", "cardinality": len(nodes)},
            {"path": "metadata.ownerReferences[*].uid", "cardinality": len(owners)},
        ]

        assert scrape.status_code == 200
        s = parse(scrape.text)
        assert value(s, "cacheproxy_cache_objects", resource="pods") == 61
        assert value(s, "cacheproxy_cache_bytes", resource="pods") == pods["bytes"]
        assert value(s, "cacheproxy_cache_synced", resource="pods") == 1
        staleness = value(s, "cacheproxy_cache_staleness_seconds", resource="pods")
        assert staleness is not None and 0 <= staleness < 10
        assert value(s, "cacheproxy_cache_events_total", resource="pods", type="ADDED") == 1
        assert value(s, "cacheproxy_watch_watchers", resource="pods") == 1
        for reason in ("events", "bytes", "total_bytes", "stall"):
            assert value(s, "cacheproxy_watch_evicted_total", resource="pods", reason=reason) == 0
        expired = {"resource": "pods", "reason": "expired"}
        assert value(s, "cacheproxy_informer_relists_total", **expired) == 1
        assert value(s, "cacheproxy_informer_watch_errors_total", **expired) == 1
        assert value(s, "cacheproxy_informer_events_total", resource="pods") == 1
        # The first watch-list (which went on as the watch) and the relist's, each started with
        # a 200; between them the watch that got 410 in-stream.
        requests = "cacheproxy_upstream_requests_total"
        assert value(s, requests, resource="pods", verb="watch-list") == 2
        assert value(s, requests, resource="pods", verb="watch") == 1
        watch_list_ok = {"resource": "pods", "verb": "watch-list", "code": "200"}
        assert value(s, "cacheproxy_upstream_responses_total", **watch_list_ok) == 2
        watch_ok = {"resource": "pods", "verb": "watch", "code": "200"}
        assert value(s, "cacheproxy_upstream_responses_total", **watch_ok) == 1
        served_list = {"verb": "list", "resource": "pods", "code": "200"}
        assert value(s, "cacheproxy_http_requests_total", **served_list) == 1
        latency = "cacheproxy_http_request_duration_seconds_count"
        assert value(s, latency, verb="list", resource="pods", code="2xx") == 1
        # The watch is still open while scraped: it is counted once, when it ends.
        served_watch = {"verb": "watch", "resource": "pods", "code": "200"}
        assert value(s, "cacheproxy_http_requests_total", **served_watch) is None

        # The client went away: the server notices, and counts the watch once.
        await until(lambda: len(hub.watchers) == 0)
        for _ in range(500):
            after = parse((await proxy.get("/metrics")).text)
            if value(after, "cacheproxy_http_requests_total", **served_watch) == 1:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the ended watch was never counted")
