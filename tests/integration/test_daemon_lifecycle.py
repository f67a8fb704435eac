"""Shutdown in order: not ready → still serving for the delay → stop accepting → watches end
cleanly → open requests finish within the grace period → informers stop."""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import orjson
import pytest

from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.daemon.config.limits import ServerLimits
from cacheproxy.informer import Phase
from cacheproxy.kube.resources import ResourceType, builtin
from cacheproxy.sim import SimServer, Simulator
from tests.integration.daemon_support import daemon_for
from tests.support import until


async def test_shutdown_drains_in_order(demo_server: SimServer) -> None:
    async with daemon_for(
        demo_server.url, shutdown_delay_seconds=0.6, shutdown_grace_seconds=5
    ) as daemon:
        assert daemon.server is not None and daemon.factory is not None
        async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
            assert (await c.get("/readyz")).status_code == 200
            rv = daemon.server.resources[next(iter(daemon.server.resources))].resource_version
            async with c.stream("GET", "/api/v1/pods", params={"watch": "1", "resourceVersion": str(rv)}) as watch:  # fmt: skip
                # An open read that waits (a resourceVersion not reached yet: up to 3 s).
                slow = asyncio.create_task(
                    c.get(
                        "/api/v1/configmaps",
                        params={
                            "resourceVersion": str(rv + 10**6),
                            "resourceVersionMatch": "NotOlderThan",
                        },
                    )
                )
                await asyncio.sleep(0.1)
                began = time.monotonic()
                stopping = asyncio.create_task(daemon.stop())
                await asyncio.sleep(0.1)
                # During the delay: not ready, but still serving.
                assert (await c.get("/readyz")).status_code == 503
                assert (await c.get("/api/v1/pods")).status_code == 200
                # Then the watch ends cleanly: a complete stream, no error event.
                lines = [line async for line in watch.aiter_lines() if line]
                assert all(orjson.loads(line)["type"] != "ERROR" for line in lines)
                assert time.monotonic() - began >= 0.5
            # The open read was allowed to finish (its own 504 after the 3 s wait), not cut.
            answer = await slow
            assert answer.status_code == 504
            assert answer.json()["reason"] == "Timeout"
            await stopping
        assert time.monotonic() - began < 6
        assert {i.reflector.phase for i in daemon.factory} == {Phase.STOPPED}
        async with httpx.AsyncClient(base_url=daemon.url, timeout=2) as c:
            try:
                await c.get("/readyz")
            except httpx.ConnectError:
                pass
            else:
                raise AssertionError("still accepting connections after shutdown")


async def test_a_reload_adds_and_removes_resources_without_dropping_other_watches(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    pods_only = (ResourceConfig(rtype=builtin("pods")), ResourceConfig(rtype=builtin("configmaps")))
    async with (
        # Read-only: what is no longer served is refused (with pass-through it would be
        # forwarded, and discovery would be upstream's).
        daemon_for(demo_server.url, resources=pods_only, passthrough=False) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        assert daemon.server is not None
        async with c.stream("GET", "/api/v1/pods", params={"watch": "1", "resourceVersion": "0"}) as watch:  # fmt: skip
            lines = watch.aiter_lines()
            for _ in range(60):  # the initial state
                await anext(lines)
            async with c.stream("GET", "/api/v1/configmaps", params={"watch": "1"}) as doomed:
                new = daemon.config.model_copy(
                    update={
                        "resources": (
                            ResourceConfig(rtype=builtin("pods")),
                            ResourceConfig(rtype=builtin("nodes")),
                        )
                    }
                )
                assert await daemon.reload(new) == ["-configmaps", "+nodes"]
                # The removed resource's watch ends; its API is gone.
                rest = [line async for line in doomed.aiter_lines()]
                assert all("ERROR" not in line for line in rest)
            assert (await c.get("/api/v1/configmaps")).status_code == 404
            assert await daemon.wait_ready(10)
            nodes = await c.get("/api/v1/nodes")
            assert nodes.status_code == 200 and len(nodes.json()["items"]) == 5
            resources = {r["name"] for r in (await c.get("/api/v1")).json()["resources"]}
            assert {"pods", "nodes"} <= resources and "configmaps" not in resources
            # The pods watch carried on through the reload.
            created = demo_sim.store.create(demo_sim.resource("pods"), {"metadata": {"name": "after-reload", "namespace": "default"}, "spec": {}})  # fmt: skip
            event = orjson.loads(await anext(lines))
            assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "after-reload")
            assert (
                event["object"]["metadata"]["resourceVersion"]
                == created["metadata"]["resourceVersion"]
            )
            await lines.aclose()
        # Nothing changed: nothing done.
        assert await daemon.reload(new) == []


async def test_removing_a_custom_resource_stops_the_watch_of_its_crd() -> None:
    widgets = ResourceType("example.com", "v1", "widgets", "Widget", namespaced=True)
    sim = Simulator(custom_resources=[widgets])
    specs = (ResourceConfig(rtype=builtin("namespaces")), ResourceConfig(rtype=widgets))
    async with SimServer(sim) as server, daemon_for(server.url, resources=specs) as daemon:
        assert daemon.crd_factory is not None
        assert len(list(daemon.crd_factory)) == 1
        # The CRD's watch is the daemon's own business: not a resource of its informer metrics;
        # its upstream requests are counted as reads of CRDs, not one label per CRD watched.
        crds = next(iter(daemon.crd_factory))
        await asyncio.wait_for(crds.wait_for_sync(), 10)
        assert daemon.server is not None
        exposition = daemon.server.metrics.exposition()
        assert b'resource="namespaces"' in exposition
        assert b"fields=metadata.name" not in exposition
        crd_lines = [
            line.split(b"{", 1)[0]
            for line in exposition.splitlines()
            if b'resource="apiextensions.k8s.io/v1/customresourcedefinitions"' in line
        ]
        assert b"cacheproxy_upstream_responses_total" in crd_lines
        assert not [name for name in crd_lines if not name.startswith(b"cacheproxy_upstream_")]
        assert await daemon.reload(daemon.config.model_copy(update={"resources": specs[:1]})) == [
            "-example.com/v1/widgets"
        ]
        assert list(daemon.crd_factory) == []


async def test_shutdown_ends_passed_through_watches_at_once_and_logs_no_error(
    demo_server: SimServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A watch of what the cache does not hold is upstream's, relayed: on shutdown it ends as
    the cache's own watches do (its client re-watches), rather than holding the process for the
    whole grace period and being cancelled with an error."""
    async with (
        daemon_for(demo_server.url, shutdown_grace_seconds=60) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as c,
        c.stream("GET", "/api/v1/namespaces/ns-0/services", params={"watch": "1"}) as relayed,
        c.stream("GET", "/api/v1/pods", params={"watch": "1"}) as cached,
    ):
        assert relayed.status_code == cached.status_code == 200
        assert daemon.server is not None and daemon.server.passthrough is not None
        await until(lambda: daemon.server.passthrough.long_running == 1)  # type: ignore[union-attr]
        stopping = asyncio.create_task(daemon.stop())
        for stream in (relayed, cached):
            # Each ends as a complete stream (no ERROR event, no broken chunk).
            lines = [line async for line in stream.aiter_lines() if line]
            assert all(orjson.loads(line)["type"] != "ERROR" for line in lines)
        await asyncio.wait_for(stopping, 30)  # far below the 60 s grace
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]


async def test_an_idle_client_connection_is_kept_for_its_next_request(
    demo_server: SimServer,
) -> None:
    """Kept as long as the API server keeps one (``server.limits.idleConnectionSeconds``, 90 s),
    not uvicorn's 5 s: a client-go program that pauses between bursts reuses its connection
    instead of paying a new TLS handshake."""
    async with daemon_for(demo_server.url, limits=ServerLimits(idle_connection_seconds=60)) as d:
        host, port = d.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        request = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
        try:
            for _ in range(2):
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200"), head
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                await asyncio.sleep(6)  # longer than uvicorn's default keep-alive
            assert not reader.at_eof()
        finally:
            writer.close()
            await writer.wait_closed()
