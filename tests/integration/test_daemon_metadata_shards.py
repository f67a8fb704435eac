"""Metadata-only reads and sharded reads through the daemon in front of the simulator: the
daemon's ``PartialObjectMetadata[List]`` answers are the simulator's (which answers as the API
server does, tests/e2e/test_metadata.py checks the daemon against a real one); N shard
selectors partition lists and watches exactly, over HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import Simulator
from tests.support import metadata_initial_events_end, until, watch_events

PODS = builtin("pods")
GUARD = 10.0
LIST_ACCEPT = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
ONE_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


def shards(n: int) -> list[str]:
    width = ((1 << 64) - 1) // n
    out = []
    for i in range(n):
        end = "0x10000000000000000" if i == n - 1 else f"0x{(i + 1) * width:016x}"
        out.append(f"shardRange(object.metadata.uid, '0x{i * width:016x}', '{end}')")
    return out


def stripped(item: dict[str, Any]) -> bytes:
    meta = {k: v for k, v in item["metadata"].items() if k != "managedFields"}
    return orjson.dumps(dict(item, metadata=meta))


@pytest.fixture
async def http(daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as c:
        yield c


async def caught_up(daemon: Daemon, sim: Simulator) -> None:
    assert daemon.server is not None
    res = daemon.server.resources[PODS]
    await until(lambda: res.resource_version >= sim.store.rv, "the daemon caught up")


async def test_metadata_lists_pages_and_gets_are_the_simulators(
    daemon: Daemon, http: httpx.AsyncClient, demo_client: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    await caught_up(daemon, demo_sim)

    async def walk(client: httpx.AsyncClient, **params: str) -> list[bytes]:
        items: list[bytes] = []
        while True:
            response = await client.get(
                "/api/v1/pods", params=params, headers={"Accept": LIST_ACCEPT}
            )
            assert response.status_code == 200, response.text
            doc = orjson.loads(response.content)
            assert (doc["kind"], doc["apiVersion"]) == (
                "PartialObjectMetadataList",
                "meta.k8s.io/v1",
            )
            items += [stripped(i) for i in doc["items"]]
            token = doc["metadata"].get("continue")
            if not token:
                return items
            params = dict(params, **{"continue": token})

    for params in (
        {},
        {"limit": "9"},
        {"labelSelector": "app=app-1"},
        {"limit": "4", "fieldSelector": "spec.nodeName=node-2"},
    ):
        assert await walk(http, **params) == await walk(demo_client, **params)
    first = orjson.loads((await demo_client.get("/api/v1/pods")).content)["items"][0]["metadata"]
    path = f"/api/v1/namespaces/{first['namespace']}/pods/{first['name']}"
    up = await demo_client.get(path, headers={"Accept": ONE_ACCEPT})
    down = await http.get(path, headers={"Accept": ONE_ACCEPT})
    assert down.status_code == 200
    assert stripped(orjson.loads(down.content)) == stripped(orjson.loads(up.content))
    assert orjson.loads(down.content)["kind"] == "PartialObjectMetadata"


def watching(
    client: httpx.AsyncClient, accept: str = "", **params: str
) -> contextlib.AbstractAsyncContextManager[list[dict[str, Any]]]:
    """A watch of the pods (``Accept: accept`` when given) read into a list while the block runs."""
    return watch_events(client, "/api/v1/pods", params, accept=accept)


async def test_a_metadata_watch_list_is_the_simulators(
    daemon: Daemon, http: httpx.AsyncClient, demo_client: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    await caught_up(daemon, demo_sim)
    params = {
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
        "timeoutSeconds": "5",
    }
    async with (
        watching(http, ONE_ACCEPT, **params) as down,
        watching(demo_client, ONE_ACCEPT, **params) as up,
    ):

        def ended(events: list[dict[str, Any]]) -> bool:
            return any(e["type"] == "BOOKMARK" for e in events)

        await until(lambda: ended(down) and ended(up), "both sent the initial events' end")
    added = [stripped(e["object"]) for e in down if e["type"] == "ADDED"]
    assert added == [stripped(e["object"]) for e in up if e["type"] == "ADDED"]
    listed = orjson.loads((await demo_client.get("/api/v1/pods")).content)["items"]
    assert len(added) == len(listed) > 0
    [end] = [e for e in down if e["type"] == "BOOKMARK"][:1]
    assert end["object"] == metadata_initial_events_end(
        end["object"]["metadata"]["resourceVersion"], blueprint=True
    )


async def test_four_shards_partition_the_list_and_the_watch(
    daemon: Daemon, http: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    await caught_up(daemon, demo_sim)
    everything = orjson.loads((await http.get("/api/v1/pods")).content)
    names: list[str] = []
    for shard in shards(4):
        doc = orjson.loads(
            (await http.get("/api/v1/pods", params={"shardSelector": shard})).content
        )
        assert doc["metadata"]["shardInfo"] == {"selector": shard}
        names += [i["metadata"]["name"] for i in doc["items"]]
    assert sorted(names) == sorted(i["metadata"]["name"] for i in everything["items"])

    store, pods = demo_sim.store, demo_sim.resource("pods")
    start = everything["metadata"]["resourceVersion"]
    async with contextlib.AsyncExitStack() as stack:
        streams = [
            await stack.enter_async_context(
                watching(http, ONE_ACCEPT if i % 2 else "", shardSelector=s, resourceVersion=start)
            )
            for i, s in enumerate(shards(4))
        ]
        assert daemon.server is not None
        hub = daemon.server.hubs[PODS]
        await until(lambda: len(hub.watchers) == 4, "the watchers are registered")
        made = [
            store.create(pods, {"metadata": {"name": f"s{i}", "namespace": "default"}, "spec": {}})
            for i in range(40)
        ]
        await until(lambda: sum(len(s) for s in streams) >= len(made), "every pod reached a shard")
    seen = [e["object"]["metadata"]["name"] for s in streams for e in s if e["type"] == "ADDED"]
    assert sorted(seen) == sorted(m["metadata"]["name"] for m in made)
    assert all(e["object"]["kind"] == "PartialObjectMetadata" for e in streams[1])


async def test_a_bad_shard_selector_is_the_api_servers_400(http: httpx.AsyncClient) -> None:
    response = await http.get(
        "/api/v1/pods",
        params={"shardSelector": "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"},
    )
    assert response.status_code == 400
    status = response.json()
    assert (status["kind"], status["reason"]) == ("Status", "BadRequest")
    assert status["message"] == (
        'invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" '
        '(did you mean "0x0000000000000000"?)'
    )
