"""A write through the daemon to a cached resource is answered once the cache holds it, so its
writer's next read or watch event through the daemon has it — here with upstream's watch events
arriving late on purpose (the simulator's ``event_delay``): without the hold, every check below
would find the cache without the write."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.daemon.config.limits import ServerLimits
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.server.resource import ServedResource
from cacheproxy.sim import SimServer, Simulator
from tests.integration.daemon_support import daemon_for, default_resources

CONFIGMAPS = builtin("configmaps")
PODS = builtin("pods")
CM_PATH = "/api/v1/namespaces/ns-0/configmaps"
LATE = 0.4
"""How late upstream's watch events come (well within the default 1 s hold)."""


def served(daemon: Daemon, rtype: object) -> ServedResource:
    assert daemon.server is not None
    return daemon.server.resources[rtype]  # type: ignore[index]


def held(daemon: Daemon, outcome: str) -> float:
    """Writes whose answer was held until the cache had them (``settled``) or not (``timeout``)."""
    assert daemon.server is not None and daemon.server.passthrough is not None
    metric = daemon.server.passthrough.metrics.write_settle
    return sum(
        sample.value
        for family in metric.collect()
        for sample in family.samples
        if sample.name.endswith("_count") and sample.labels["outcome"] == outcome
    )


@pytest.fixture
async def late(demo_sim: Simulator, demo_server: SimServer) -> AsyncIterator[Daemon]:
    """The daemon over the demo cluster, upstream's watch events coming :data:`LATE` late."""
    async with daemon_for(demo_server.url) as daemon:
        demo_sim.faults.event_delay = LATE
        yield daemon


@pytest.fixture
async def proxy(late: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=late.url, timeout=10) as c:
        yield c


async def test_a_create_update_and_patch_are_answered_once_the_cache_holds_them(
    late: Daemon, proxy: httpx.AsyncClient
) -> None:
    cache = served(late, CONFIGMAPS)
    made = await proxy.post(CM_PATH, json={"metadata": {"name": "w"}, "data": {"n": "0"}})
    assert made.status_code == 201, made.text
    entry = cache.store.get("ns-0/w")
    assert entry is not None and str(entry.rv) == made.json()["metadata"]["resourceVersion"]
    body = made.json() | {"data": {"n": "1"}}
    put = await proxy.put(f"{CM_PATH}/w", json=body)
    assert put.status_code == 200
    assert str(cache.resource_version) >= put.json()["metadata"]["resourceVersion"]
    patched = await proxy.patch(
        f"{CM_PATH}/w",
        json={"data": {"n": "2"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    entry = cache.store.get("ns-0/w")
    assert entry is not None and str(entry.rv) == patched.json()["metadata"]["resourceVersion"]
    assert held(late, "settled") == 3 and held(late, "timeout") == 0


async def test_a_status_write_and_a_binding_are_answered_once_the_cache_holds_them(
    late: Daemon, proxy: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    cache = served(late, PODS)
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    made = await proxy.post("/api/v1/namespaces/ns-0/pods", json=pod)
    assert made.status_code == 201, made.text
    before = cache.store.get("ns-0/p")
    assert before is not None
    bound = await proxy.post(
        "/api/v1/namespaces/ns-0/pods/p/binding",
        json={"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-1"}},
    )
    assert bound.status_code == 201, bound.text
    after = cache.store.get("ns-0/p")
    assert after is not None and after.rv > before.rv  # the binding's change, with no RV said
    status = await proxy.patch(
        "/api/v1/namespaces/ns-0/pods/p/status",
        json={"status": {"phase": "Running"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status.status_code == 200, status.text
    entry = cache.store.get("ns-0/p")
    assert entry is not None and str(entry.rv) == status.json()["metadata"]["resourceVersion"]


async def test_deletes_are_answered_once_the_cache_no_longer_holds_them(
    late: Daemon, proxy: httpx.AsyncClient
) -> None:
    cache = served(late, CONFIGMAPS)
    for name, team in [("a", "x"), ("b", "x"), ("c", "y")]:
        made = await proxy.post(
            CM_PATH, json={"metadata": {"name": name, "labels": {"team": team}}}
        )
        assert made.status_code == 201
    gone = await proxy.delete(f"{CM_PATH}/a")
    assert gone.status_code == 200, gone.text
    assert cache.store.get("ns-0/a") is None
    # A collection: every object it selected, and only those.
    collection = await proxy.delete(CM_PATH, params={"labelSelector": "team=x"})
    assert collection.status_code == 200, collection.text
    assert [i["metadata"]["name"] for i in collection.json()["items"]] == ["b"]
    assert cache.store.get("ns-0/b") is None
    assert cache.store.get("ns-0/c") is not None
    assert held(late, "timeout") == 0


async def test_a_dry_run_is_not_held(late: Daemon, proxy: httpx.AsyncClient) -> None:
    made = await proxy.post(
        CM_PATH, params={"dryRun": "All"}, json={"metadata": {"name": "dry"}, "data": {}}
    )
    assert made.status_code == 201, made.text
    assert held(late, "settled") == held(late, "timeout") == 0


async def test_a_write_whose_event_does_not_come_in_time_is_answered_anyway(
    demo_sim: Simulator, demo_server: SimServer
) -> None:
    limits = ServerLimits(write_settle_seconds=0.05)
    async with daemon_for(demo_server.url, limits=limits) as daemon:
        demo_sim.faults.event_delay = 0.8  # the event comes long after the write gave up
        async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as proxy:
            made = await proxy.post(CM_PATH, json={"metadata": {"name": "slow"}})
            assert made.status_code == 201
        assert held(daemon, "timeout") == 1


async def test_a_resource_cached_with_selectors_or_in_another_namespace_is_not_held(
    demo_sim: Simulator, demo_server: SimServer
) -> None:
    resources = (
        *default_resources()[:1],
        ResourceConfig(rtype=CONFIGMAPS, label_selector="team=x"),
        ResourceConfig(rtype=builtin("apps/v1/deployments"), namespace="ns-1"),
    )
    async with daemon_for(demo_server.url, resources=resources) as daemon:
        assert served(daemon, CONFIGMAPS).write_settle == 0
        demo_sim.faults.event_delay = 0.8  # held, each write would wait this long and settle
        async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as proxy:
            made = await proxy.post(CM_PATH, json={"metadata": {"name": "n"}})
            assert made.status_code == 201
            deployment = {
                "metadata": {"name": "d"},
                "spec": {
                    "selector": {"matchLabels": {"a": "b"}},
                    "template": {
                        "metadata": {"labels": {"a": "b"}},
                        "spec": {"containers": [{"name": "c", "image": "i"}]},
                    },
                },
            }
            other = await proxy.post("/apis/apps/v1/namespaces/ns-0/deployments", json=deployment)
            assert other.status_code == 201, other.text
        assert held(daemon, "settled") == held(daemon, "timeout") == 0
