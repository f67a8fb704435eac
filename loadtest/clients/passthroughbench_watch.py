"""A watch of an uncached resource through cacheproxy, beside the same watch on the API server.

:func:`check_watch` opens a watch of the Services of :data:`WATCH_NAMESPACE` (a kind the
benchmark's daemon does not cache, so the watch is forwarded) through the daemon and one on the
API server, both from the resourceVersion of one list; once both answered, it makes ``writes``
writes upstream, one after the other (Service ``watch-K`` created, merge-patched, deleted, in
turn), and waits up to 10 s for every write's event (type, name and the resourceVersion of the
write's answer) on both watches. It counts the events each watch delivered, compares the two
sequences (the same events, in the same order) and times each event from its write's response
(both watches are read by the same httpx code on one event loop; an event can be read just
before its write's response, a lag slightly below zero).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from cacheproxy.envtest import Cluster
from loadtest.clients.fanout import percentile
from loadtest.reports.passthroughbench_report import SIDES, WatchCheck

__all__ = ["WATCH_NAMESPACE", "WatchStream", "check_watch", "service_object"]

WATCH_NAMESPACE = "passthrough-watch"
_MERGE = "application/merge-patch+json"
_WATCH_TIMEOUT = httpx.Timeout(30.0, read=None)


def service_object(name: str, namespace: str) -> dict[str, Any]:
    """A Service with one port (what the API server needs to create one)."""
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"ports": [{"port": 80}]}}


Event = tuple[str, str, str]
"""(type, name, resourceVersion) of a watch event or of the write that should cause it."""


@dataclass
class WatchStream:
    """What one side's watch received, each event with its arrival time."""

    side: str
    received: list[tuple[Event, float]] = field(default_factory=list)
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """Set on every event (cleared by the reader waiting for more)."""
    problems: list[str] = field(default_factory=list)

    def keys(self) -> list[Event]:
        return [key for key, _ in self.received]

    async def read(self, client: httpx.AsyncClient, path: str) -> None:
        try:
            async with client.stream("GET", path, timeout=_WATCH_TIMEOUT) as response:
                if response.status_code != 200:
                    body = await response.aread()
                    self.problems.append(f"{self.side} watch: {response.status_code} {body!r}")
                    return
                self.opened.set()
                partial = b""
                async for chunk in response.aiter_bytes():
                    now = time.perf_counter()
                    *lines, partial = (partial + chunk).split(b"\n")
                    for line in lines:
                        self._event(orjson.loads(line), now)
            self.problems.append(f"{self.side} watch: the server ended it")
        finally:
            self.opened.set()  # also when it failed: the writes are not waited for in vain

    def _event(self, event: dict[str, Any], now: float) -> None:
        if event["type"] == "ERROR":
            self.problems.append(f"{self.side} watch: ERROR {event['object']}")
        meta = event["object"].get("metadata", {})
        self.received.append(
            ((event["type"], meta.get("name", ""), meta.get("resourceVersion", "")), now)
        )
        self.arrived.set()


async def _write(client: httpx.AsyncClient, j: int) -> Event:
    """Write ``j``: Service ``watch-{j // 3}`` created, merge-patched, deleted, in turn."""
    base = f"/api/v1/namespaces/{WATCH_NAMESPACE}/services"
    name = f"watch-{j // 3}"
    if j % 3 == 0:
        kind, response = (
            "ADDED",
            await client.post(base, json=service_object(name, WATCH_NAMESPACE)),
        )
    elif j % 3 == 1:
        patch = orjson.dumps({"metadata": {"annotations": {"loadtest/j": str(j)}}})
        headers = {"Content-Type": _MERGE}
        response = await client.patch(f"{base}/{name}", content=patch, headers=headers)
        kind = "MODIFIED"
    else:
        kind, response = "DELETED", await client.delete(f"{base}/{name}")
    response.raise_for_status()
    return kind, name, orjson.loads(response.content)["metadata"]["resourceVersion"]


async def _until_delivered(
    streams: Sequence[WatchStream], expected: set[Event], deadline: float
) -> None:
    """Until every stream received every ``expected`` event, or ``deadline`` seconds."""
    async with asyncio.timeout(deadline):
        for stream in streams:
            while not expected <= set(stream.keys()):
                stream.arrived.clear()
                await stream.arrived.wait()


async def check_watch(cluster: Cluster, daemon_url: str, *, writes: int) -> WatchCheck:
    """See the module docstring."""
    headers = cluster.admin.headers
    clients = {
        "cacheproxy": httpx.AsyncClient(base_url=daemon_url, headers=headers, timeout=30.0),
        "direct": cluster.async_client(),
    }
    streams = {side: WatchStream(side) for side in SIDES}
    made: list[tuple[Event, float]] = []
    async with cluster.async_client() as writer, clients["cacheproxy"], clients["direct"]:
        listed = await writer.get(f"/api/v1/namespaces/{WATCH_NAMESPACE}/services")
        listed.raise_for_status()
        rv = orjson.loads(listed.content)["metadata"]["resourceVersion"]
        path = f"/api/v1/namespaces/{WATCH_NAMESPACE}/services?watch=1&resourceVersion={rv}"
        tasks = [
            asyncio.create_task(streams[s].read(clients[s], path), name=f"watch-{s}") for s in SIDES
        ]
        try:
            async with asyncio.timeout(30):
                await asyncio.gather(*(s.opened.wait() for s in streams.values()))
            started = time.perf_counter()
            for j in range(writes):
                key = await _write(writer, j)
                made.append((key, time.perf_counter()))
            write_rate = writes / (time.perf_counter() - started)
            with contextlib.suppress(TimeoutError):
                await _until_delivered(list(streams.values()), {k for k, _ in made}, 10.0)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    written_at = dict(made)
    delivered, p50, p99 = {}, {}, {}
    for side, stream in streams.items():
        lags = sorted(at - written_at[k] for k, at in stream.received if k in written_at)
        delivered[side] = len(set(written_at) & set(stream.keys()))
        p50[side] = 1000 * percentile(lags, 0.5, total=writes)
        p99[side] = 1000 * percentile(lags, 0.99, total=writes)
    return WatchCheck(
        resource="services",
        writes=writes,
        delivered=delivered,
        events={s: len(stream.received) for s, stream in streams.items()},
        same_as_direct=streams["cacheproxy"].keys() == streams["direct"].keys(),
        lag_p50_ms=p50,
        lag_p99_ms=p99,
        write_rate=write_rate,
        problems=[p for stream in streams.values() for p in stream.problems],
    )
