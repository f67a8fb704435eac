"""The upstream transport against the real API server: with several resources watched on one
daemon, every change upstream reaches the daemon's watchers promptly.

This is the regression test of the HTTP/2 stall: over one multiplexed HTTP/2 connection,
httpcore's reader lock held by a stream with nothing to read kept other streams' events queued
until the next bytes arrived (4-30+ s later). The default is HTTP/1.1 with a connection per
watch; the test fails with ``upstream.http2: true`` (checked by hand: most writes were not seen
within the guard).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from cacheproxy.envtest import Cluster
from tests.e2e.support import create, daemon_over, fresh_namespace, merge_patch
from tests.e2e.watch_support import watching

SEVEN = [
    "pods",
    "configmaps",
    "namespaces",
    "serviceaccounts",
    {"resource": "secrets"},
    "apps/v1/deployments",
    "events",
]
PROMPTLY = 5.0
"""Each event must arrive within this (a liveness guard: the stall took 4-30+ s)."""


async def test_every_write_reaches_the_daemons_watchers_while_seven_resources_are_watched(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    async with (
        daemon_over(cluster, tmp_path, resources=SEVEN) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as proxy,
    ):
        rv = (await proxy.get(path)).json()["metadata"]["resourceVersion"]
        async with watching(proxy, path, {"resourceVersion": rv}) as down:
            for i in range(20):
                name = f"cm-{i}"
                if i % 2:
                    await merge_patch(upstream, f"{path}/cm-{i - 1}", {"data": {"i": str(i)}})
                    name = f"cm-{i - 1}"
                else:
                    await create(upstream, path, {"metadata": {"name": name}})
                expected = i + 1
                try:
                    async with asyncio.timeout(PROMPTLY):
                        await down.wait_for(lambda events, n=expected: len(events) >= n, name)
                except TimeoutError:
                    raise AssertionError(
                        f"write {i} ({name}) did not reach the daemon's watcher within "
                        f"{PROMPTLY:g} s"
                    ) from None
                await asyncio.sleep(0.3)
            assert [t for t, _, _ in down.changes()] == ["ADDED", "MODIFIED"] * 10
