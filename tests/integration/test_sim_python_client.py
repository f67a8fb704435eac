"""The official ``kubernetes`` Python client against the simulator: list, create, patch, watch."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kubernetes import client, watch

from cacheproxy.sim import SimServer, Simulator


@pytest.fixture
def core_v1(demo_server: SimServer) -> Iterator[client.CoreV1Api]:
    config = client.Configuration()
    config.host = demo_server.url
    with client.ApiClient(config) as api_client:
        yield client.CoreV1Api(api_client)


def _pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "py-client"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
    }


async def test_lists_pods_across_namespaces(core_v1: client.CoreV1Api, demo_sim: Simulator) -> None:
    pods = await asyncio.to_thread(core_v1.list_pod_for_all_namespaces)
    assert pods.items and len(pods.items) == demo_sim.store.count(demo_sim.resource("pods"))
    assert pods.metadata.resource_version == str(demo_sim.store.rv)
    assert all(p.metadata.uid for p in pods.items)
    # only a pod the scheduler could not place (the demo has one) lacks a node
    unplaced = [p for p in pods.items if not p.spec.node_name]
    assert len(unplaced) < len(pods.items)
    for pod in unplaced:
        assert pod.status.phase == "Pending"
        scheduled = [c for c in pod.status.conditions if c.type == "PodScheduled"]
        assert [(c.status, c.reason) for c in scheduled] == [("False", "Unschedulable")]


async def test_lists_with_a_label_selector_and_pages(core_v1: client.CoreV1Api) -> None:
    first = await asyncio.to_thread(
        core_v1.list_namespaced_pod, "ns-1", label_selector="app=app-1", limit=2
    )
    assert len(first.items) == 2
    assert all(p.metadata.labels["app"] == "app-1" for p in first.items)
    assert first.metadata._continue
    rest = await asyncio.to_thread(
        core_v1.list_namespaced_pod,
        "ns-1",
        label_selector="app=app-1",
        _continue=first.metadata._continue,
    )
    names = [p.metadata.name for p in first.items + rest.items]
    assert names == sorted(names) and len(set(names)) == len(names)


async def test_creates_and_patches_a_pod(core_v1: client.CoreV1Api, demo_sim: Simulator) -> None:
    created = await asyncio.to_thread(
        core_v1.create_namespaced_pod, "default", _pod("made-by-client")
    )
    assert created.metadata.uid
    assert created.metadata.resource_version == str(demo_sim.store.rv)
    patched = await asyncio.to_thread(
        core_v1.patch_namespaced_pod,
        "made-by-client",
        "default",
        {"metadata": {"labels": {"patched": "yes"}}},
    )
    assert patched.metadata.labels == {"app": "py-client", "patched": "yes"}
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)
    stored = demo_sim.store.get(demo_sim.resource("pods"), "default", "made-by-client")
    assert stored is not None and stored["metadata"]["labels"]["patched"] == "yes"


async def test_creating_a_pod_twice_is_a_conflict(core_v1: client.CoreV1Api) -> None:
    await asyncio.to_thread(core_v1.create_namespaced_pod, "default", _pod("twice"))
    with pytest.raises(client.ApiException) as info:
        await asyncio.to_thread(core_v1.create_namespaced_pod, "default", _pod("twice"))
    assert info.value.status == 409
    assert '"reason":"AlreadyExists"' in info.value.body


async def test_watch_streams_changes_after_a_resource_version(
    core_v1: client.CoreV1Api, demo_sim: Simulator
) -> None:
    start_rv = str(demo_sim.store.rv)
    pods = demo_sim.resource("pods")

    def collect() -> list[tuple[str, str]]:
        seen: list[tuple[str, str]] = []
        w = watch.Watch()
        for event in w.stream(
            core_v1.list_namespaced_pod, "default", resource_version=start_rv, timeout_seconds=10
        ):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 3:
                w.stop()
        return seen

    watcher = asyncio.create_task(asyncio.to_thread(collect))
    for _ in range(200):
        if any(getattr(w, "rtype", None) is pods for w in demo_sim.store.watchers()):
            break
        await asyncio.sleep(0.02)
    created = demo_sim.store.create(
        pods, _pod("w1") | {"metadata": {"name": "w1", "namespace": "default"}}
    )
    demo_sim.store.update(
        pods, {**created, "metadata": {**created["metadata"], "labels": {"x": "1"}}}
    )
    demo_sim.store.delete(pods, "default", "w1")
    seen = await asyncio.wait_for(watcher, timeout=20)
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
