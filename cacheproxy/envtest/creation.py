"""Creating objects in the real cluster as controllers would leave them: the object, then its
status through the ``/status`` subresource."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from cacheproxy.envtest.process import EnvtestError

__all__ = ["collection_path", "create", "create_all"]

_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
_NO_STATUS_WRITES = frozenset(("namespaces", "events", "configmaps", "secrets"))


def collection_path(resource: str, namespace: str | None = None) -> str:
    """The collection path of a resource config name (``pods``, ``apps/v1/deployments``)."""
    if "/" in resource:
        group_version, plural = resource.rsplit("/", 1)
        base = f"/apis/{group_version}"
    else:
        base, plural = "/api/v1", resource
    return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"


async def create(client: httpx.AsyncClient, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """POST ``body``; the created object, or {} when it existed already."""
    response = await client.post(path, json=body)
    if response.status_code == 409:
        return {}
    if response.status_code != 201:
        raise EnvtestError(f"POST {path}: {response.status_code} {response.text}")
    created: dict[str, Any] = response.json()
    return created


async def _create_with_status(
    client: httpx.AsyncClient, gate: asyncio.Semaphore, resource: str, obj: Mapping[str, Any]
) -> None:
    body = copy.deepcopy(dict(obj))
    status = body.pop("status", None)
    for key in _SERVER_SET:
        body["metadata"].pop(key, None)
    path = collection_path(resource, body["metadata"].get("namespace"))
    async with gate:
        created = await create(client, path, body)
        if not created or not status or resource in _NO_STATUS_WRITES:
            return
        name = created["metadata"]["name"]
        response = await client.patch(
            f"{path}/{name}/status",
            json={"status": status},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        if response.status_code != 200:
            raise EnvtestError(
                f"PATCH {path}/{name}/status: {response.status_code} {response.text}"
            )


async def create_all(
    client: httpx.AsyncClient, objects: Iterable[tuple[str, Mapping[str, Any]]], *, concurrency: int
) -> None:
    """See :meth:`cacheproxy.envtest.Cluster.load`."""
    by_resource: dict[str, list[Mapping[str, Any]]] = {}
    namespaces: set[str] = set()
    for resource, obj in objects:
        by_resource.setdefault(resource, []).append(obj)
        namespace = obj["metadata"].get("namespace")
        if namespace:
            namespaces.add(namespace)
    gate = asyncio.Semaphore(concurrency)
    for ns in sorted(namespaces):
        await create(client, "/api/v1/namespaces", {"metadata": {"name": ns}})
        await create(
            client, f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "default"}}
        )
    for resource, objs in by_resource.items():
        await asyncio.gather(*(_create_with_status(client, gate, resource, o) for o in objs))
