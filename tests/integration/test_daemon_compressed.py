"""A daemon that keeps pods compressed answers byte for byte what a plain one answers.

Two daemons in front of one simulator, the same but for ``storage.compressed`` on pods. After
churn, both at the same RV, every kind of read is asked of both: full, namespace, label and
index lists, a limit walk, metadata-only lists, GETs, a gzipped list, and a watch from RV 0
(its initial state and the events that follow).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import random
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest

from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.daemon.config.model import CompressionSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.informer import Storage
from cacheproxy.informer.store import PackedEntry
from cacheproxy.kube.resources import builtin
from cacheproxy.server import reads, resource
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.sim.churn import ChurnDriver
from cacheproxy.sim.workload import DemoSpec, demo_objects
from tests.integration.daemon_support import daemon_for, default_resources
from tests.support import serving

PODS = builtin("pods")
GUARD = 10.0
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


@pytest.fixture
def sim() -> Simulator:
    sim = Simulator()
    sim.load(demo_objects(DemoSpec(pods=300)))
    return sim


@pytest.fixture
async def server(sim: Simulator) -> AsyncIterator[SimServer]:
    async with serving(sim) as (server, _):
        yield server


def compressed_resources() -> tuple[ResourceConfig, ...]:
    return tuple(
        dataclasses.replace(r, storage=Storage(compressed=True)) if r.rtype == PODS else r
        for r in default_resources()
    )


@pytest.fixture
async def daemons(server: SimServer) -> AsyncIterator[tuple[Daemon, Daemon]]:
    on = CompressionSettings(enabled=True)
    async with (
        daemon_for(server.url, compression=on) as plain,
        daemon_for(server.url, resources=compressed_resources(), compression=on) as packed,
    ):
        yield plain, packed


async def caught_up(sim: Simulator, *daemons: Daemon) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD
    for daemon in daemons:
        assert daemon.server is not None
        served = daemon.server.resources[PODS]
        while served.resource_version != sim.store.rv:
            if loop.time() > deadline:
                pytest.fail(f"a daemon never reached RV {sim.store.rv}")
            await asyncio.sleep(0.005)


async def both(
    plain: httpx.AsyncClient,
    packed: httpx.AsyncClient,
    path: str,
    *,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> bytes:
    headers = {"Accept-Encoding": "identity", **(headers or {})}
    a, b = await asyncio.gather(
        plain.get(path, params=params, headers=headers),
        packed.get(path, params=params, headers=headers),
    )
    assert a.status_code == b.status_code == 200, (path, a.text[:200], b.text[:200])
    assert a.content == b.content, path
    return a.content


@pytest.mark.parametrize("group_items", [1024, 37])
async def test_every_read_of_a_compressed_store_is_the_plain_stores_byte_for_byte(
    sim: Simulator,
    daemons: tuple[Daemon, Daemon],
    group_items: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With groups of 37 items, the long lists of the compressed store go out streamed."""
    monkeypatch.setattr(resource, "GROUP_ITEMS", group_items)
    monkeypatch.setattr(reads, "GROUP_ITEMS", group_items)
    plain_daemon, packed_daemon = daemons
    assert packed_daemon.server is not None
    store = packed_daemon.server.resources[PODS].informer.store
    assert store.packer is not None and store.packer.ready
    assert all(isinstance(e, PackedEntry) for e in store.entries())

    churn = ChurnDriver(
        sim.store,
        rate=0,
        rng=random.Random(5),
        namespaces=["ns-0", "ns-1", "ns-2"],
        nodes=[f"node-{i}" for i in range(3)],
        apps=[f"app-{i}" for i in range(4)],
        max_pods=400,
    )
    churn.step(60)
    await caught_up(sim, plain_daemon, packed_daemon)
    async with (
        httpx.AsyncClient(base_url=plain_daemon.url, timeout=GUARD) as plain,
        httpx.AsyncClient(base_url=packed_daemon.url, timeout=GUARD) as packed,
    ):
        full = orjson.loads(await both(plain, packed, "/api/v1/pods"))
        assert len(full["items"]) == len(list(store.entries())) > 200
        await both(plain, packed, "/api/v1/namespaces/ns-1/pods")
        await both(plain, packed, "/api/v1/pods", params={"labelSelector": "app=app-1"})
        await both(plain, packed, "/api/v1/pods", params={"fieldSelector": "spec.nodeName=node-2"})
        await both(plain, packed, "/api/v1/pods", headers={"Accept": METADATA_LIST})
        params = {"limit": "70"}
        while True:
            page = orjson.loads(await both(plain, packed, "/api/v1/pods", params=params))
            if not page["metadata"].get("continue"):
                break
            params = {"limit": "70", "continue": page["metadata"]["continue"]}
        for item in full["items"][:: len(full["items"]) // 10]:
            meta = item["metadata"]
            await both(plain, packed, f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")

        identity = (
            await plain.get("/api/v1/pods", headers={"Accept-Encoding": "identity"})
        ).content
        gzip_header = {"Accept-Encoding": "gzip"}
        async with packed.stream("GET", "/api/v1/pods", headers=gzip_header) as zipped:
            assert zipped.headers.get("content-encoding") == "gzip"
            body = b"".join([chunk async for chunk in zipped.aiter_raw()])
        assert gzip.decompress(body) == identity


async def test_a_watch_of_a_compressed_store_sends_the_plain_stores_lines(
    sim: Simulator, daemons: tuple[Daemon, Daemon]
) -> None:
    churn = ChurnDriver(
        sim.store,
        rate=0,
        rng=random.Random(8),
        namespaces=["ns-0", "ns-1"],
        nodes=["node-0", "node-1"],
        apps=["app-0", "app-1"],
        max_pods=400,
    )

    async def lines(daemon: Daemon, rv: str, count: int) -> list[bytes]:
        got: list[bytes] = []
        params = {"watch": "1", "resourceVersion": rv}
        async with (
            httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as client,
            client.stream("GET", "/api/v1/pods", params=params) as response,
        ):
            async for line in response.aiter_lines():
                got.append(line.encode())
                if len(got) == count:
                    return got
        pytest.fail(f"the watch ended after {len(got)} lines")

    await caught_up(sim, *daemons)
    before = str(sim.store.rv)
    churn.step(30)
    await caught_up(sim, *daemons)
    for rv, count in ((before, 30), ("0", len(sim.store.names(sim.resource("pods"))))):
        plain_lines, packed_lines = await asyncio.gather(*(lines(d, rv, count) for d in daemons))
        assert plain_lines == packed_lines
        kinds = {orjson.loads(line)["type"] for line in packed_lines}
        assert kinds == ({"ADDED"} if rv == "0" else kinds & {"ADDED", "MODIFIED", "DELETED"})
