"""Warm restarts against the simulator (the real API server's version is tests/e2e): a daemon
restarted over its snapshots lists nothing, and one whose snapshots' RVs upstream forgot (the
simulator restarted: its watch caches start anew) relists once and holds what upstream holds."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx

from cacheproxy.daemon.config import DaemonConfig, ServerSettings
from cacheproxy.daemon.config.model import PersistenceSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.sim import SimServer
from cacheproxy.upstream import UpstreamConfig
from tests.integration.daemon_support import default_resources

_REQUESTS = re.compile(r"^cacheproxy_upstream_requests_total\{([^}]*)\} (\S+)$", re.MULTILINE)


def requests(daemon: Daemon, verb: str) -> int:
    assert daemon.metrics is not None
    text = daemon.metrics.exposition().decode()
    return sum(int(float(v)) for labels, v in _REQUESTS.findall(text) if f'verb="{verb}"' in labels)


_RELISTS = re.compile(r"^cacheproxy_informer_relists_total\{([^}]*)\} (\S+)$", re.MULTILINE)


def relisted(daemon: Daemon) -> dict[str, int]:
    """Relists after a 410, by resource."""
    assert daemon.metrics is not None
    out: dict[str, int] = {}
    for labels, v in _RELISTS.findall(daemon.metrics.exposition().decode()):
        found = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if found["reason"] == "expired" and float(v):
            out[found["resource"]] = int(float(v))
    return out


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def config(directory: Path) -> DaemonConfig:
    return DaemonConfig(
        resources=default_resources(),
        server=ServerSettings(port=0),
        persistence=PersistenceSettings(directory=directory),
    )


async def states(daemon: Daemon) -> set[str]:
    async with httpx.AsyncClient(base_url=daemon.url) as proxy:
        doc = (await proxy.get("/status")).json()
    return {res["state"] for res in doc["resources"].values()}


async def pod_names(daemon: Daemon) -> list[str]:
    async with httpx.AsyncClient(base_url=daemon.url) as proxy:
        body = (await proxy.get("/api/v1/pods")).json()
    return sorted(i["metadata"]["name"] for i in body["items"])


async def test_a_restart_over_snapshots_lists_nothing_and_catches_up(
    demo_server: SimServer, demo_client: httpx.AsyncClient, tmp_path: Path
) -> None:
    upstream = UpstreamConfig(server=demo_server.url)
    async with Daemon(config(tmp_path), upstream, manage_gc=False) as first:
        assert await first.wait_ready(10)
        assert requests(first, "list") > 0 or requests(first, "watch-list") > 0
    assert files(tmp_path) == [
        "apps_v1_deployments.snapshot",
        "configmaps.snapshot",
        "namespaces.snapshot",
        "pods.snapshot",
    ]
    pods = (await demo_client.get("/api/v1/pods")).json()["items"]
    gone = pods[0]["metadata"]
    deleted = await demo_client.delete(
        f"/api/v1/namespaces/{gone['namespace']}/pods/{gone['name']}"
    )
    assert deleted.status_code == 200
    async with Daemon(config(tmp_path), upstream, manage_gc=False) as second:
        assert await second.wait_ready(10)
        assert requests(second, "list") == requests(second, "watch-list") == 0
        assert await states(second) == {"confirmed"}
        expected = sorted(p["metadata"]["name"] for p in pods[1:])
        for _ in range(200):
            if await pod_names(second) == expected:
                break
            await asyncio.sleep(0.02)
        assert await pod_names(second) == expected


async def test_a_restart_after_upstream_forgot_the_rvs_relists_once(
    demo_server: SimServer, demo_client: httpx.AsyncClient, tmp_path: Path
) -> None:
    upstream = UpstreamConfig(server=demo_server.url)
    async with Daemon(config(tmp_path), upstream, manage_gc=False) as first:
        assert await first.wait_ready(10)
    made = await demo_client.post(
        "/api/v1/namespaces/ns-0/configmaps", json={"metadata": {"name": "after-the-snapshots"}}
    )
    assert made.status_code == 201
    await demo_server.restart()  # its watch caches start after every snapshot's RV
    stale = config(tmp_path).model_copy(
        update={"persistence": PersistenceSettings(directory=tmp_path, serve_stale=True)}
    )
    async with Daemon(stale, upstream, manage_gc=False) as second:
        assert await second.wait_ready(10)
        for _ in range(500):
            if await states(second) == {"synced"}:
                break
            await asyncio.sleep(0.02)
        assert await states(second) == {"synced"}
        # One each, after its watch's 410 (by a watch-list: the simulator serves them).
        assert relisted(second) == {r.rtype.config_name: 1 for r in default_resources()}
