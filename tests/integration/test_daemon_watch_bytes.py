"""A watcher's buffer is bounded in bytes: a client that stops reading while large objects flow is
cut once ``server.limits.watchBufferBytes`` wait for it (counted with ``reason="bytes"``), and a
client that reads gets every event in order. The daemon runs in front of a simulator."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from cacheproxy.daemon.config import ResourceConfig, ServerLimits
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimServer, Simulator
from tests.integration.daemon_support import daemon_for
from tests.support import raw_watch, until

CONFIGMAPS = builtin("configmaps")
GUARD = 10.0
"""Seconds any single wait may take before the test fails (a guard, never an assertion)."""


async def _until_closed(sock: socket.socket) -> None:
    """Read (and drop) what the kernel held for ``sock`` until the daemon ends the connection."""
    loop = asyncio.get_running_loop()
    with contextlib.suppress(ConnectionResetError):
        while await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), GUARD):
            pass


def _evicted(text: str) -> dict[str, float]:
    """``cacheproxy_watch_evicted_total`` of configmaps, by reason."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "cacheproxy_watch_evicted_total" and (
                sample.labels["resource"] == "configmaps"
            ):
                out[sample.labels["reason"]] = sample.value
    return out


async def test_a_client_that_stops_reading_is_cut_by_bytes_while_a_reader_gets_everything(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    # 1 MiB per watcher is 16 events of 64 KB; the event count and the stall budget are roomy:
    # only the bytes can act first.
    limits = ServerLimits(watch_buffer=100_000, watch_buffer_bytes=1 << 20, watch_stall_seconds=3)
    store, cms = demo_sim.store, demo_sim.resource("configmaps")
    async with (
        daemon_for(
            demo_server.url, resources=(ResourceConfig(rtype=CONFIGMAPS),), limits=limits
        ) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as http,
    ):
        assert daemon.server is not None
        hub = daemon.server.hubs[CONFIGMAPS]
        rv = daemon.server.resources[CONFIGMAPS].resource_version
        path = f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"
        received: list[tuple[str, str, str]] = []

        async def read() -> None:
            async with http.stream("GET", path) as response:
                async for line in response.aiter_lines():
                    meta = orjson.loads(line)["object"]["metadata"]
                    received.append(
                        (orjson.loads(line)["type"], meta["name"], meta["resourceVersion"])
                    )
                    if meta["name"] == "end":
                        return

        reader = asyncio.create_task(read(), name="reader")
        stalled = await raw_watch(daemon.port, path)
        try:
            await until(lambda: len(hub.watchers) == 2, "both watchers are registered")
            written: list[tuple[str, str, str]] = []
            ballast = "x" * 65536
            while not hub.evicted:
                assert len(written) < 600, "the client that does not read was never cut"
                obj: dict[str, Any] = store.create(
                    cms, {"metadata": {"name": f"big-{len(written)}"}, "data": {"b": ballast}}
                )
                written.append(
                    ("ADDED", obj["metadata"]["name"], obj["metadata"]["resourceVersion"])
                )
                await until(lambda: len(received) == len(written), "the reader keeps up")
            assert hub.evictions == {"events": 0, "bytes": 1, "total_bytes": 0, "stall": 0}
            # Cut: what was queued for it is dropped, and its connection ends.
            assert daemon.server.watch_bytes.total <= 1 << 20
            await _until_closed(stalled)
            end = store.create(cms, {"metadata": {"name": "end"}})
            written.append(("ADDED", "end", end["metadata"]["resourceVersion"]))
            await asyncio.wait_for(reader, GUARD)
            assert received == written
            metrics = (await http.get("/metrics")).text
            assert _evicted(metrics) == {"events": 0, "bytes": 1, "total_bytes": 0, "stall": 0}
        finally:
            stalled.close()
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
