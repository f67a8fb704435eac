"""The simulator answers list, get and watch over real HTTP on loopback."""

from __future__ import annotations

import httpx
import orjson

from cacheproxy.sim import Simulator


async def test_lists_the_demo_pods_in_key_order(
    demo_client: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    r = await demo_client.get("/api/v1/pods")
    assert r.status_code == 200
    body = r.json()
    assert body["kind"] == "PodList"
    keys = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in body["items"]]
    assert keys and keys == sorted(keys)
    assert len(keys) == demo_sim.store.count(demo_sim.resource("pods"))
    assert body["metadata"]["resourceVersion"] == str(demo_sim.store.rv)


async def test_watch_sees_a_create(client: httpx.AsyncClient, sim: Simulator) -> None:
    rv = sim.store.rv
    async with client.stream(
        "GET", f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"
    ) as r:
        assert r.status_code == 200
        sim.store.create(
            sim.resource("configmaps"), {"metadata": {"name": "c1", "namespace": "default"}}
        )
        # The first line, however long it takes: a stream that ends first fails the test.
        event = orjson.loads(await anext(r.aiter_lines()))
        assert event["type"] == "ADDED"
        assert event["object"]["metadata"]["name"] == "c1"
        assert event["object"]["kind"] == "ConfigMap"
