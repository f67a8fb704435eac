"""Consistent reads through the server: lists and gets with resourceVersion unset wait until the
cache has reached upstream's RV, other reads do not ask upstream; the fallbacks' answers; the
metrics."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cacheproxy.errors import TransportError
from cacheproxy.informer import FakeListerWatcher, SharedInformer, Store
from cacheproxy.kube.resources import builtin
from cacheproxy.server.app import CacheServer
from cacheproxy.server.consistent import ConsistencyOptions, ConsistentReads
from cacheproxy.server.resource import ServedResource


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {}}


async def no_sleep(_: float) -> None:
    await asyncio.sleep(0)


class Rig:
    """A served pods resource over a fake upstream whose probe answers ``ahead`` RVs past what
    it has sent (writes still on their way to the cache)."""

    def __init__(self, options: ConsistencyOptions) -> None:
        self.lw = FakeListerWatcher(kind="Pod")
        self.ahead = 0
        self.probes = 0
        self.failure: BaseException | None = None
        self.informer = SharedInformer(
            self.lw, name="pods", store=Store(kind="Pod", api_version="v1"), sleep=no_sleep
        )
        self.reads = ConsistentReads(self.probe, options, name="pods")
        self.resource = ServedResource(builtin("pods"), self.informer, consistency=self.reads)
        self.server = CacheServer([self.resource], version={})

    async def probe(self) -> int:
        self.probes += 1
        if self.failure is not None:
            raise self.failure
        return self.lw.rv + self.ahead


@contextlib.asynccontextmanager
async def served(**options: Any) -> AsyncIterator[tuple[Rig, httpx.AsyncClient]]:
    rig = Rig(ConsistencyOptions(**options))
    rig.lw.emit("ADDED", pod("a", app="web"))
    task = asyncio.create_task(rig.informer.run(), name="informer-under-test")
    transport = httpx.ASGITransport(app=rig.server)
    try:
        await asyncio.wait_for(rig.informer.wait_for_sync(), 5)
        async with httpx.AsyncClient(transport=transport, base_url="http://cache") as client:
            yield rig, client
    finally:
        await rig.reads.close()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


PODS = "/api/v1/namespaces/default/pods"


async def test_a_list_with_rv_unset_waits_for_a_write_the_cache_has_not_seen() -> None:
    async with served(timeout=10.0) as (rig, client):
        rig.ahead = 1  # upstream committed a write; its event is still on the way
        answer = asyncio.create_task(client.get(PODS, params={"labelSelector": "app=web"}))
        await asyncio.sleep(0.1)
        assert not answer.done()
        rig.ahead = 0
        rig.lw.emit("ADDED", pod("b", app="web"))
        response = await answer
        assert response.status_code == 200
        assert "warning" not in response.headers
        body = response.json()
        assert [i["metadata"]["name"] for i in body["items"]] == ["a", "b"]
        assert body["metadata"]["resourceVersion"] == str(rig.lw.rv)


async def test_a_get_with_rv_unset_waits_too() -> None:
    async with served(timeout=10.0) as (rig, client):
        rig.ahead = 1
        answer = asyncio.create_task(client.get(f"{PODS}/b"))
        await asyncio.sleep(0.1)
        assert not answer.done()
        rig.ahead = 0
        rig.lw.emit("ADDED", pod("b"))
        response = await answer
        assert response.status_code == 200
        assert response.json()["metadata"]["name"] == "b"


@pytest.mark.parametrize(
    "params",
    [
        {"resourceVersion": "0"},
        {"resourceVersion": "2"},
        {"resourceVersion": "2", "resourceVersionMatch": "Exact"},
        {"watch": "1", "timeoutSeconds": "1"},
    ],
)
async def test_other_reads_do_not_ask_upstream(params: dict[str, str]) -> None:
    async with served() as (rig, client):
        rig.ahead = 100
        response = await client.get(PODS, params=params)
        assert response.status_code == 200
        assert rig.probes == 0


async def test_invalid_requests_are_refused_before_asking_upstream() -> None:
    async with served() as (rig, client):
        response = await client.get(PODS, params={"labelSelector": "a in"})
        assert response.status_code == 400
        assert rig.probes == 0


async def test_a_timed_out_read_is_served_from_the_cache_with_a_warning() -> None:
    async with served(timeout=0.2) as (rig, client):
        rig.ahead = 5
        response = await client.get(PODS)
        assert response.status_code == 200
        assert response.headers["warning"] == (
            '299 - "not a consistent read: the cache is at resourceVersion 2, upstream at 7 '
            'within 0.2s; served from the cache as it is"'
        )
        assert [i["metadata"]["name"] for i in response.json()["items"]] == ["a"]


async def test_a_timed_out_read_is_a_504_when_so_configured() -> None:
    async with served(timeout=0.2, on_timeout="error") as (rig, client):
        rig.failure = TransportError("connection refused")
        response = await client.get(f"{PODS}/a")
        assert response.status_code == 504
        assert response.headers["retry-after"] == "1"
        body = response.json()
        assert body["reason"] == "Timeout"
        assert "upstream could not be asked (connection refused)" in body["message"]


async def test_the_metrics_count_probes_waits_and_fallbacks() -> None:
    async with served(timeout=0.2) as (rig, client):
        assert (await client.get(PODS)).status_code == 200
        rig.ahead = 3
        assert "warning" in (await client.get(PODS)).headers
        text = (await client.get("/metrics")).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    pods = (("resource", "pods"),)
    assert samples["cacheproxy_consistent_probes_total", pods] == 2
    assert samples["cacheproxy_consistent_reads_total", pods] == 2
    assert samples["cacheproxy_consistent_waits_total", pods] == 1
    assert (
        samples["cacheproxy_consistent_fallbacks_total", (("reason", "cache_behind"), *pods)] == 1
    )
    assert samples["cacheproxy_consistent_wait_seconds_count", pods] == 2
    assert samples["cacheproxy_consistent_wait_seconds_sum", pods] >= 0.2
