"""What upstream's discovery says of the resources of one group version (``GET /apis/{g}/{v}``):
each as a :class:`~cacheproxy.kube.resources.ResourceType` with its kind, scope and the names
clients find it by — singular, short names, categories — and its ``storageVersionHash``.

The daemon reads it for the custom resources it caches, whose names only upstream knows (a CRD's
``spec.names``), so that its own discovery says of them what the API server says and a
configuration may name a custom resource by ``GROUP/VERSION/PLURAL`` alone. Every authenticated
user may read discovery (the ``system:discovery`` role): the daemon's own credentials do.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import httpx

from cacheproxy.kube.resources import GroupVersion, ResourceType
from cacheproxy.upstream.apilistwatch import send_for_json
from cacheproxy.upstream.client import LIST_TIMEOUT

__all__ = ["resource_types"]


async def resource_types(
    client: httpx.AsyncClient, gv: GroupVersion, *, verbs: Collection[str] = ()
) -> list[ResourceType]:
    """The resources upstream serves in ``gv`` (subresources left out; with ``verbs``, only
    those that allow each of them). Raises the API server's 404 ApiError when it does not
    serve the group version, TransportError when it cannot be reached."""
    request = client.build_request("GET", gv.path, timeout=LIST_TIMEOUT)
    body = await send_for_json(client, request)
    entries = body.get("resources") if isinstance(body, dict) else None
    return [
        _resource_type(gv, entry)
        for entry in entries or ()
        if isinstance(entry, dict)
        and "/" not in str(entry.get("name", "/"))
        and set(verbs) <= set(entry.get("verbs") or ())
    ]


def _resource_type(gv: GroupVersion, entry: dict[str, Any]) -> ResourceType:
    kind = str(entry.get("kind", ""))
    return ResourceType(
        group=gv.group,
        version=gv.version,
        resource=str(entry["name"]),
        kind=kind,
        namespaced=bool(entry.get("namespaced")),
        singular=str(entry.get("singularName") or kind.lower()),
        short_names=tuple(str(n) for n in entry.get("shortNames") or ()),
        categories=tuple(str(c) for c in entry.get("categories") or ()),
        storage_version_hash=str(entry.get("storageVersionHash") or ""),
    )
