"""Metadata-only clients through the daemon against the real API server: the same
``as=PartialObjectMetadata[List]`` requests to both, the same bytes back but for what
legitimately differs (a list's own resourceVersion and continue tokens, and
``metadata.managedFields``, which the daemon's default transform drops); the list kind as a raw
client and the official Python client decode it; kubectl's ``-o name`` and ``--show-kind``.

The API server under test is 1.28, without KEP-5866's ``shardSelector`` (it ignores the
parameter): sharded reads are checked against the daemon's own unsharded answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import httpx
import kubernetes.client
import orjson
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from tests.e2e.support import converged, create, daemon_over, delete, fresh_namespace, merge_patch
from tests.integration.clients import KUBECTL_VERSIONS, kubectl_binary, run_kubectl
from tests.support import watch_events

pytestmark = pytest.mark.every_server

# client-go's metadata client configured for JSON (its default puts protobuf first, which the
# API server then answers; the daemon answers JSON only, the next clause).
LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
ONE_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
GUARD = 30.0


def bytes_without_managed_fields(item: dict[str, Any]) -> bytes:
    """An item's compact JSON in its own key order, ``metadata.managedFields`` left out."""
    item = dict(item, metadata={k: v for k, v in item["metadata"].items() if k != "managedFields"})
    return orjson.dumps(item)


async def both(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, path: str, accept: str, **params: str
) -> tuple[httpx.Response, httpx.Response]:
    headers = {"Accept": accept}
    up = await upstream.get(path, params=params, headers=headers)
    down = await proxy.get(path, params=params, headers=headers)
    assert up.status_code == down.status_code == 200, (up.text[:300], down.text[:300])
    return up, down


@pytest.mark.parametrize("path", ["/api/v1/pods", "/api/v1/namespaces", "/api/v1/nodes"])
async def test_a_metadata_list_is_the_api_servers_byte_for_byte(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, path: str
) -> None:
    await converged(upstream, proxy, path)
    up, down = await both(upstream, proxy, path, LIST_ACCEPT)
    assert up.headers["content-type"] == down.headers["content-type"] == "application/json"
    up_doc, down_doc = orjson.loads(up.content), orjson.loads(down.content)
    assert list(down_doc) == list(up_doc) == ["kind", "apiVersion", "metadata", "items"]
    assert (down_doc["kind"], down_doc["apiVersion"]) == (
        "PartialObjectMetadataList",
        "meta.k8s.io/v1",
    )
    assert (up_doc["kind"], up_doc["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert list(down_doc["metadata"]) == list(up_doc["metadata"]) == ["resourceVersion"]
    assert [bytes_without_managed_fields(i) for i in down_doc["items"]] == [
        bytes_without_managed_fields(i) for i in up_doc["items"]
    ]
    assert up_doc["items"]


async def test_metadata_pages_and_selectors_answer_what_the_api_server_answers(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    await converged(upstream, proxy, "/api/v1/pods")

    async def walk(client: httpx.AsyncClient, **params: str) -> list[bytes]:
        items: list[bytes] = []
        query = dict(params, limit="7")
        while True:
            response = await client.get(
                "/api/v1/pods", params=query, headers={"Accept": LIST_ACCEPT}
            )
            assert response.status_code == 200, response.text
            doc = orjson.loads(response.content)
            assert doc["kind"] == "PartialObjectMetadataList"
            items += [bytes_without_managed_fields(i) for i in doc["items"]]
            token = doc["metadata"].get("continue")
            if not token:
                return items
            query["continue"] = token

    for selector in ({}, {"labelSelector": "app=app-1"}, {"fieldSelector": "spec.nodeName=node-2"}):
        assert await walk(proxy, **selector) == await walk(upstream, **selector)


async def test_a_metadata_get_is_the_api_servers(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    up_list, _ = await converged(upstream, proxy, "/api/v1/pods")
    pod = up_list["items"][0]["metadata"]
    path = f"/api/v1/namespaces/{pod['namespace']}/pods/{pod['name']}"
    up, down = await both(upstream, proxy, path, ONE_ACCEPT)
    assert bytes_without_managed_fields(orjson.loads(down.content)) == bytes_without_managed_fields(
        orjson.loads(up.content)
    )


def watching(
    client: httpx.AsyncClient, path: str, **params: str
) -> contextlib.AbstractAsyncContextManager[list[dict[str, Any]]]:
    """A metadata-only watch of ``path`` read into a list of events while the block runs."""
    return watch_events(client, path, params, accept=ONE_ACCEPT)


async def test_a_metadata_watch_sends_the_api_servers_events(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    start = (await upstream.get(path)).json()["metadata"]["resourceVersion"]
    async with (
        watching(upstream, path, resourceVersion=start, allowWatchBookmarks="true") as up,
        watching(proxy, path, resourceVersion=start, allowWatchBookmarks="true") as down,
    ):
        await create(upstream, path, {"metadata": {"name": "x", "labels": {"a": "1"}}})
        await merge_patch(upstream, f"{path}/x", {"metadata": {"labels": {"a": "2"}}})
        await delete(upstream, f"{path}/x")

        def changes(events: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
            return [
                (e["type"], bytes_without_managed_fields(e["object"]))
                for e in events
                if e["type"] != "BOOKMARK"
            ]

        deadline = asyncio.get_running_loop().time() + GUARD
        while len(changes(up)) < 3 or len(changes(down)) < 3:
            assert asyncio.get_running_loop().time() < deadline, (up, down)
            await asyncio.sleep(0.05)
    assert [t for t, _ in changes(up)] == ["ADDED", "MODIFIED", "DELETED"]
    assert changes(down) == changes(up)
    assert {e["object"]["kind"] for e in down} == {"PartialObjectMetadata"}


async def test_a_metadata_watch_from_the_start_sends_the_state_as_partial_objects(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    up_list, _ = await converged(upstream, proxy, "/api/v1/namespaces/ns-1/pods")
    async with watching(proxy, "/api/v1/namespaces/ns-1/pods", timeoutSeconds="5") as down:
        deadline = asyncio.get_running_loop().time() + GUARD
        while len(down) < len(up_list["items"]):
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
    up_partial = orjson.loads(
        (
            await upstream.get("/api/v1/namespaces/ns-1/pods", headers={"Accept": LIST_ACCEPT})
        ).content
    )
    assert [bytes_without_managed_fields(e["object"]) for e in down] == [
        bytes_without_managed_fields(i) for i in up_partial["items"]
    ]


async def test_the_python_client_decodes_the_list_kind_through_the_daemon(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, daemon: Daemon
) -> None:
    await converged(upstream, proxy, "/api/v1/namespaces/ns-2/pods")
    configuration = kubernetes.client.Configuration()
    configuration.host = daemon.url
    api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))

    def listed() -> bytes:
        response = api.list_namespaced_pod(
            "ns-2", _headers={"Accept": LIST_ACCEPT}, _preload_content=False
        )
        data: bytes = response.data
        return data

    try:
        raw = await asyncio.to_thread(listed)
    finally:
        api.api_client.close()
    doc = json.loads(raw)
    assert (doc["kind"], doc["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert doc["items"] and {i["kind"] for i in doc["items"]} == {"PartialObjectMetadata"}
    assert {i["metadata"]["namespace"] for i in doc["items"]} == {"ns-2"}
    assert all(set(i) == {"kind", "apiVersion", "metadata"} for i in doc["items"])


async def test_two_shards_partition_what_the_api_server_lists(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, daemon: Daemon
) -> None:
    # The official client (its ListOptions have KEP-5866's shard_selector) through the daemon.
    up, _ = await converged(upstream, proxy, "/api/v1/pods")
    shards = [
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
    ]
    configuration = kubernetes.client.Configuration()
    configuration.host = daemon.url
    api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
    keys: list[tuple[str, str]] = []  # names repeat across namespaces (other tests' pods)
    try:
        for shard in shards:
            pods = await asyncio.to_thread(api.list_pod_for_all_namespaces, shard_selector=shard)
            assert pods.metadata.shard_info.selector == shard
            keys += [(p.metadata.namespace, p.metadata.name) for p in pods.items]
    finally:
        api.api_client.close()
    listed = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in up["items"]]
    assert sorted(keys) == sorted(listed)
    assert len(keys) == len(set(keys))


@pytest.mark.kubectl
async def test_kubectl_names_and_kinds_through_the_daemon(
    cluster: Cluster,
    daemon: Daemon,
    upstream: httpx.AsyncClient,
    proxy: httpx.AsyncClient,
    tmp_path: Path,
) -> None:
    await converged(upstream, proxy, "/api/v1/namespaces/ns-0/pods")
    kubectl = kubectl_binary(KUBECTL_VERSIONS[-1])
    for args in (
        ("get", "pods", "-n", "ns-0", "-o", "name"),
        ("get", "pods", "-n", "ns-0", "--show-kind"),
    ):
        proc = await asyncio.create_subprocess_exec(
            kubectl,
            "--kubeconfig",
            str(cluster.admin.kubeconfig),
            "--cache-dir",
            str(tmp_path / "direct"),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), GUARD)
        assert proc.returncode == 0, err.decode()
        code, proxied, err_text = await run_kubectl(
            kubectl, daemon.url, tmp_path / "proxied", *args
        )
        assert code == 0, err_text
        first = [line.split()[0] for line in out.decode().splitlines()]
        assert [line.split()[0] for line in proxied.splitlines()] == first
        assert any(line.startswith("pod/") for line in first)


DROP = "application/json;drop=metadata.managedFields"
"""KEP-5958's Accept parameter (alpha in 1.37): the objects without their managedFields."""


async def test_a_protobuf_preferring_client_gets_json_and_drop_managed_fields_is_honoured(
    cluster: Cluster, upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, tmp_path: Path
) -> None:
    ns = await fresh_namespace(upstream, "drop")
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for name in ("a", "b"):
        await create(upstream, path, {"metadata": {"name": name}, "data": {"k": name}})
    await converged(upstream, proxy, path)
    # A typed clientset's Accept: the daemon answers in JSON, what it answers plain JSON with.
    typed = {"Accept": "application/vnd.kubernetes.protobuf,application/json"}
    for target in (path, f"{path}/a"):
        plain, preferring = [await proxy.get(target, headers=h) for h in ({}, typed)]
        assert preferring.headers["content-type"] == "application/json"
        assert preferring.content == plain.content
    # The default transform drops managedFields: the parameter changes nothing.
    assert (await proxy.get(path, headers={"Accept": DROP})).content == (
        await proxy.get(path)
    ).content
    # A resource that keeps them: served with them, and without them when asked.
    keeping = [{"resource": "configmaps", "transform": {"dropFields": []}}]
    async with (
        daemon_over(cluster, tmp_path, resources=keeping) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as kept,
    ):
        up, down = await converged(upstream, kept, path)
        assert [i["metadata"]["managedFields"] for i in down["items"]] == [
            i["metadata"]["managedFields"] for i in up["items"]
        ]
        dropped = (await kept.get(path, headers={"Accept": DROP})).json()
        assert [orjson.dumps(i) for i in dropped["items"]] == [
            bytes_without_managed_fields(i) for i in up["items"]
        ]
        assert dropped["metadata"] == down["metadata"]
        one = (await kept.get(f"{path}/a", headers={"Accept": DROP})).json()
        assert orjson.dumps(one) == bytes_without_managed_fields(
            (await upstream.get(f"{path}/a")).json()
        )
        params = {"watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"}
        async with kept.stream("GET", path, params=params, headers={"Accept": DROP}) as watch:
            lines = [orjson.loads(line) async for line in watch.aiter_lines() if line]
        assert [e["object"]["metadata"]["name"] for e in lines] == ["a", "b"]
        assert all("managedFields" not in e["object"]["metadata"] for e in lines)
