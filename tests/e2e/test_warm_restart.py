"""Warm restarts against the real API server: a daemon restarted over its snapshots
resumes its watches from their RVs with no upstream list; when the API server no longer holds
those RVs it relists once, and a watcher connected to the restored state gets the difference.
The counts come from the daemon's own upstream request metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from cacheproxy.daemon.config import load_config, resolve_upstream
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from tests.e2e.support import (
    converged,
    counters,
    create,
    daemon_over,
    delete,
    fresh_namespace,
    syncs,
    upstream_requests,
    write_config,
)
from tests.e2e.watch_support import watching

pytestmark = pytest.mark.every_server

RESOURCES: list[Any] = [{"resource": "pods", "indexes": ["spec.nodeName"]}, "configmaps"]


async def states(daemon: Daemon) -> dict[str, str]:
    async with httpx.AsyncClient(base_url=daemon.url) as proxy:
        doc = (await proxy.get("/status")).json()
    return {name: res["state"] for name, res in doc["resources"].items()}


async def test_a_warm_restart_resumes_every_watch_without_a_list(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    extra = {"persistence.dir": str(tmp_path / "snapshots")}
    ns = await fresh_namespace(upstream, "warm")
    async with daemon_over(cluster, tmp_path, resources=RESOURCES, extra=extra) as first:
        assert syncs(first)  # a cold start lists
        assert await states(first) == {"pods": "synced", "configmaps": "synced"}
    # While it is down: a change it must get from the resumed watch.
    made = await create(
        upstream, f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "w"}}
    )
    async with (
        daemon_over(cluster, tmp_path, resources=RESOURCES, extra=extra) as second,
        httpx.AsyncClient(base_url=second.url) as proxy,
    ):
        assert syncs(second) == {}
        assert set(upstream_requests(second, "watch")) == {"pods", "configmaps"}
        assert await states(second) == {"pods": "confirmed", "configmaps": "confirmed"}
        _, down = await converged(upstream, proxy, f"/api/v1/namespaces/{ns}/configmaps")
        assert [i["metadata"]["name"] for i in down["items"]] == ["w"]
        await converged(upstream, proxy, "/api/v1/pods")
        assert syncs(second) == {}
    assert made["metadata"]["name"] == "w"


async def test_an_expired_rv_relists_once_and_a_watcher_of_the_restored_state_gets_the_difference(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    extra = {"persistence.dir": str(tmp_path / "snapshots"), "persistence.serveStale": True}
    ns = await fresh_namespace(upstream, "expired")
    path = f"/api/v1/namespaces/{ns}/configmaps"
    await create(upstream, path, {"metadata": {"name": "old"}})
    async with (
        daemon_over(cluster, tmp_path, resources=RESOURCES, extra=extra) as first,
        httpx.AsyncClient(base_url=first.url) as proxy,
    ):
        await converged(upstream, proxy, path)
    # While it is down: a deletion and a creation, then the API server forgets the RVs the
    # snapshots are at (restarted over a moved etcd: its watch caches begin after them).
    await delete(upstream, f"{path}/old")
    await create(upstream, path, {"metadata": {"name": "new"}})
    await asyncio.to_thread(cluster.restart_apiserver, bump_revision=True)

    config = load_config(write_config(tmp_path, cluster, resources=RESOURCES, extra=extra), env={})
    async with Daemon(config, resolve_upstream(config.upstream)) as second:
        assert await second.wait_ready(10)  # served from the snapshot at once (serveStale)
        async with httpx.AsyncClient(base_url=second.url, timeout=30) as proxy:
            # RV "0": the cache as it is (unset would wait for upstream's RV: after the relist).
            listed = (await proxy.get(path, params={"resourceVersion": "0"})).json()
            assert [i["metadata"]["name"] for i in listed["items"]] == ["old"]
            restored_rv = listed["metadata"]["resourceVersion"]
            async with watching(proxy, path, {"resourceVersion": restored_rv}) as watch:
                await watch.wait_named("old", "DELETED")
                await watch.wait_named("new", "ADDED")
                changes = sorted((t, name) for t, name, _ in watch.changes())
                assert changes == [("ADDED", "new"), ("DELETED", "old")]
                assert watch.status == 200 and not watch.ended.is_set()  # it survived the relist
            await converged(upstream, proxy, path)
        # every resource's relist done (the pods' takes longer than the configmaps' path above)
        deadline = asyncio.get_running_loop().time() + 30
        while await states(second) != {"pods": "synced", "configmaps": "synced"}:
            assert asyncio.get_running_loop().time() < deadline, await states(second)
            await asyncio.sleep(0.1)
        relists = counters(second, "cacheproxy_informer_relists_total")
        expired = {dict(k)["resource"]: v for k, v in relists.items() if ("reason", "expired") in k}
        assert expired == {"pods": 1, "configmaps": 1}
        assert syncs(second) == {"pods": 1, "configmaps": 1}  # one relist each
        assert await states(second) == {"pods": "synced", "configmaps": "synced"}
