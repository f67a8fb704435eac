"""Real clients through the daemon against the same clients talking to the API server directly:
kubectl (the oldest and the newest pinned versions) and the official Python client print and
return the same things either way."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import kubernetes.client
import kubernetes.config
import kubernetes.watch
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from tests.e2e.clientgo import Informer
from tests.e2e.support import (
    converged,
    create,
    delete,
    fresh_namespace,
    kubectl_both,
    kubectl_output,
    merge_patch,
    without_managed_fields,
)
from tests.integration.clients import KUBECTL_VERSIONS, kubectl_binary

pytestmark = [pytest.mark.kubectl, pytest.mark.every_server]

GUARD = 30.0


@pytest.fixture(params=KUBECTL_VERSIONS)
def kubectl(request: pytest.FixtureRequest) -> str:
    return kubectl_binary(request.param)


GETS = [
    ("get", "pods", "-A"),
    ("get", "pods", "-n", "ns-1", "-o", "wide"),
    ("get", "pods", "-A", "-l", "app in (app-0,app-3)", "--sort-by", ".metadata.name"),
    ("get", "pods", "-A", "--field-selector", "spec.nodeName=node-2"),
    ("get", "deployments", "-A", "-o", "wide"),
    ("get", "replicasets", "-n", "ns-0"),
    ("get", "nodes"),
    ("get", "services", "-A"),
    ("get", "configmaps", "-n", "ns-2", "-o", "name"),
    ("get", "pods", "-n", "ns-0", "--show-kind", "--no-headers"),
]


@pytest.mark.parametrize("args", GETS, ids=[" ".join(a[1:]) for a in GETS])
async def test_kubectl_get_prints_what_it_prints_against_the_api_server(
    kubectl: str,
    cluster: Cluster,
    daemon: Daemon,
    upstream: httpx.AsyncClient,
    proxy: httpx.AsyncClient,
    tmp_path: Path,
    args: tuple[str, ...],
) -> None:
    await converged(upstream, proxy, "/api/v1/pods")
    direct, proxied = await kubectl_both(kubectl, cluster, daemon.url, tmp_path, *args)
    assert direct.strip(), "the query prints something"
    assert proxied == direct


async def test_kubectl_get_as_json_is_the_api_servers_objects(
    kubectl: str,
    cluster: Cluster,
    daemon: Daemon,
    upstream: httpx.AsyncClient,
    proxy: httpx.AsyncClient,
    tmp_path: Path,
) -> None:
    await converged(upstream, proxy, "/apis/apps/v1/deployments")
    direct, proxied = await kubectl_both(
        kubectl, cluster, daemon.url, tmp_path, "get", "deployments", "-A", "-o", "json"
    )
    assert json.loads(proxied) == without_managed_fields(json.loads(direct))


async def test_kubectl_get_watch_prints_a_change_made_upstream(
    kubectl: str, daemon: Daemon, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    ns = await fresh_namespace(upstream)
    proc = await asyncio.create_subprocess_exec(
        kubectl,
        "--kubeconfig",
        "/dev/null",
        "--server",
        daemon.url,
        "--cache-dir",
        str(tmp_path),
        "get",
        "configmaps",
        "-n",
        ns,
        "-w",
        "-o",
        "name",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        await create(upstream, f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "x"}})
        line = await asyncio.wait_for(proc.stdout.readline(), GUARD)
        assert line.decode().strip() == "configmap/x"
    finally:
        proc.kill()
        await proc.wait()


async def test_kubectl_api_resources_lists_the_cached_resources(
    kubectl: str, daemon: Daemon, tmp_path: Path
) -> None:
    out = await kubectl_output(
        kubectl,
        "--kubeconfig",
        "/dev/null",
        "--server",
        daemon.url,
        "--cache-dir",
        str(tmp_path),
        "api-resources",
        "-o",
        "name",
    )
    assert set(out.split()) == {
        "configmaps",
        "events",
        "namespaces",
        "nodes",
        "pods",
        "services",
        "deployments.apps",
        "replicasets.apps",
    }


# ---------------------------------------------------------------------- the Python client


def _api(host: str | None, cluster: Cluster) -> kubernetes.client.CoreV1Api:
    if host is None:
        client = kubernetes.config.new_client_from_config(str(cluster.admin.kubeconfig))
    else:
        configuration = kubernetes.client.Configuration()
        configuration.host = host
        client = kubernetes.client.ApiClient(configuration)
    return kubernetes.client.CoreV1Api(client)


def _names_and_rvs(pods: Any) -> list[tuple[str, str, str]]:
    return [
        (p.metadata.namespace, p.metadata.name, p.metadata.resource_version) for p in pods.items
    ]


async def test_the_python_client_lists_and_reads_what_it_reads_from_the_api_server(
    cluster: Cluster, daemon: Daemon, upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    await converged(upstream, proxy, "/api/v1/pods")
    direct, proxied = _api(None, cluster), _api(daemon.url, cluster)
    try:
        # The client is synchronous; the daemon runs on this loop: call it from a thread.
        up = await asyncio.to_thread(direct.list_pod_for_all_namespaces, label_selector="app=app-2")
        down = await asyncio.to_thread(
            proxied.list_pod_for_all_namespaces, label_selector="app=app-2"
        )
        assert _names_and_rvs(down) == _names_and_rvs(up) and up.items
        name, namespace = up.items[0].metadata.name, up.items[0].metadata.namespace
        one_up = await asyncio.to_thread(direct.read_namespaced_pod, name, namespace)
        one_down = await asyncio.to_thread(proxied.read_namespaced_pod, name, namespace)
        assert one_down.spec == one_up.spec and one_down.status == one_up.status
    finally:
        direct.api_client.close()
        proxied.api_client.close()


async def test_the_python_clients_watch_streams_a_change_made_upstream(
    cluster: Cluster, daemon: Daemon, upstream: httpx.AsyncClient
) -> None:
    ns = await fresh_namespace(upstream)
    proxied = _api(daemon.url, cluster)

    def first_event() -> tuple[str, str]:
        watch = kubernetes.watch.Watch()
        for event in watch.stream(proxied.list_namespaced_config_map, ns, timeout_seconds=20):
            watch.stop()
            return event["type"], event["object"].metadata.name
        raise AssertionError("the watch ended without an event")

    try:
        reader = asyncio.create_task(asyncio.to_thread(first_event))
        await asyncio.sleep(0.5)  # the watch is open (or lists first; either way it sees x)
        await create(upstream, f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "x"}})
        assert await asyncio.wait_for(reader, GUARD) == ("ADDED", "x")
    finally:
        proxied.api_client.close()


async def test_a_client_go_informer_syncs_by_watch_list_and_follows_events_as_from_the_api_server(
    cluster: Cluster, daemon: Daemon, upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    # client-go 1.35's requests (tests/e2e/clientgo.py): a watch-list first, protobuf preferred.
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for i in range(3):
        await create(upstream, path, {"metadata": {"name": f"cm-{i}"}, "data": {"n": str(i)}})
    await converged(upstream, proxy, path)
    changed = asyncio.Event()  # either informer's store moved
    through = Informer(proxy, path, changed=changed)
    direct = Informer(upstream, path, accept="application/json", changed=changed)

    async def upstream_state() -> list[tuple[str, str]]:
        items = (await upstream.get(path)).json()["items"]
        return sorted(
            (f"{ns}/{i['metadata']['name']}", i["metadata"]["resourceVersion"]) for i in items
        )

    async def agree() -> None:
        want = await upstream_state()
        async with asyncio.timeout(GUARD):
            while not through.state() == direct.state() == want:
                changed.clear()
                await changed.wait()

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(i.run(), name="informer") for i in (through, direct)]
        try:
            async with asyncio.timeout(GUARD):
                await asyncio.gather(through.synced.wait(), direct.synced.wait())
            await agree()
            first = through.requests[0]
            assert first["sendInitialEvents"] == "true" and "resourceVersion" not in first
            assert len(through.end_bookmarks) == 1  # synced by the watch-list, kept as the watch
            if cluster.assets.minor >= (1, 32):
                # The API server serves it too: the same end bookmark's annotations.
                assert (
                    through.end_bookmarks[0]["metadata"]["annotations"]
                    == (direct.end_bookmarks[0]["metadata"]["annotations"])
                )
            else:
                # Without the WatchList gate the API server refuses it: client-go lists.
                assert direct.requests[1] == {"limit": "500", "resourceVersion": "0"}
            made = await create(upstream, path, {"metadata": {"name": "later"}})
            await merge_patch(upstream, f"{path}/cm-0", {"data": {"n": "changed"}})
            await delete(upstream, f"{path}/cm-1")
            await agree()
            assert through.store[f"{ns}/cm-0"]["data"] == {"n": "changed"}
            assert through.store[f"{ns}/later"]["metadata"]["uid"] == made["metadata"]["uid"]
            # Asked protobuf first, answered in JSON, which client-go reads as well.
            assert through.content_types == {"application/json"}
            assert len(through.requests) == 1  # one stream all along
        finally:
            for task in tasks:
                task.cancel()
