"""A slow watcher is bounded in bytes against the real API server: ConfigMaps of ~64 KB written in
a loop, one client watching through the daemon that never reads and one that reads. The one that
never reads is cut (its connection ends, ``cacheproxy_watch_evicted_total{reason="bytes"}``
counts it), the reader gets every event in order, and the daemon's memory does not grow with
what the cut client did not take."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from cacheproxy.kube.resources import builtin
from tests.e2e.support import counters, create, daemon_over, fresh_namespace, merge_patch
from tests.e2e.watch_support import GUARD
from tests.support import raw_watch, until

pytestmark = pytest.mark.every_server

CONFIGMAPS = builtin("configmaps")
BALLAST = 64_000
WRITES = 400
"""~26 MB written: without a bound in bytes the client that does not read would hold it all."""
LIMIT = 1 << 20


def _rss() -> int:
    """This process's resident bytes (the daemon runs in it)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def test_a_watcher_that_never_reads_is_cut_by_bytes_and_a_reader_gets_everything(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    names = [f"big-{i}" for i in range(4)]
    for name in names:  # a few objects rewritten: the cache itself stays small
        await create(upstream, path, {"metadata": {"name": name}, "data": {"b": ""}})
    extra = {
        "server.limits.watchBufferBytes": LIMIT,
        # Roomy: only the bytes can act first; the cut connection ends within this.
        "server.limits.watchStallSeconds": 5,
    }
    async with (
        daemon_over(cluster, tmp_path, resources=["configmaps"], extra=extra) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as proxy,
    ):
        assert daemon.server is not None
        hub = daemon.server.hubs[CONFIGMAPS]
        listed = (await proxy.get(path)).json()
        assert len(listed["items"]) == len(names)
        first_rv = int(listed["metadata"]["resourceVersion"])
        watch = f"{path}?watch=1&resourceVersion={first_rv}"
        received: list[tuple[str, str, str]] = []

        async def read() -> None:
            async with proxy.stream("GET", watch, timeout=None) as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    event = orjson.loads(line)
                    meta = event["object"]["metadata"]
                    received.append((event["type"], meta["name"], meta["resourceVersion"]))

        reader = asyncio.create_task(read(), name="reader")
        stalled = await raw_watch(daemon.port, watch)
        try:
            await until(lambda: len(hub.watchers) == 2, "both watchers are registered")
            rss_before = _rss()
            written: list[tuple[str, str, str]] = []
            queued_most = 0
            for i in range(WRITES):
                name = names[i % len(names)]
                ballast = f"{i:06d}".ljust(BALLAST, "x")
                obj: dict[str, Any] = await merge_patch(
                    upstream, f"{path}/{name}", {"data": {"b": ballast}}
                )
                written.append(("MODIFIED", name, obj["metadata"]["resourceVersion"]))
                queued_most = max(queued_most, daemon.server.watch_bytes.total)
                # The reader stays within a few events: only the other one falls behind.
                await until(lambda: len(received) >= len(written) - 4, "the reader keeps up")
            await until(lambda: len(received) == len(written), "the reader gets every event")
            assert received == written
            grown = _rss() - rss_before
            assert hub.evictions == {"events": 0, "bytes": 1, "total_bytes": 0, "stall": 0}
            # Its response ends (the daemon gives up on the batch it was writing within the
            # stall budget), and so does its connection: reading then finds what the kernel
            # held, then the end.
            await until(lambda: _watches_ended(daemon) == 1, "its watch ends", within=3 * GUARD)
            await _read_until_closed(stalled)
            evicted = counters(daemon, "cacheproxy_watch_evicted_total")
            assert evicted[(("reason", "bytes"), ("resource", "configmaps"))] == 1
            # What waited for the watchers never passed the bound of the one that fell behind
            # (plus the reader's few events); without it that one alone would have held all
            # ~26 MB written, and the daemon would have grown by as much.
            assert queued_most <= LIMIT + 4 * (BALLAST + 1024)
            # The cache itself holds the writes it keeps for resumes (its event log): the rest
            # of the growth is what the watchers pinned.
            resource = daemon.server.resources[CONFIGMAPS]
            kept = sum(e.entry.size for e in resource.informer.event_log.since(first_rv))
            assert grown - kept < WRITES * BALLAST // 2, f"grew by {grown}, {kept} of it kept"
        finally:
            stalled.close()
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)


async def _read_until_closed(sock: socket.socket) -> None:
    """Read (and drop) what the kernel held for ``sock`` until the end of the connection."""
    loop = asyncio.get_running_loop()
    with contextlib.suppress(ConnectionResetError):
        while await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), GUARD):
            pass


def _watches_ended(daemon: Daemon) -> float:
    """Watches of configmaps the daemon finished serving (counted when each ends)."""
    samples = counters(daemon, "cacheproxy_http_requests_total")
    return sum(v for labels, v in samples.items() if ("verb", "watch") in labels)
