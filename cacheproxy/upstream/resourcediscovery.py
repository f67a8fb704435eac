"""What upstream's discovery says of the resources it serves: each as a
:class:`~cacheproxy.kube.resources.ResourceType` with its kind, scope and the names clients find
it by — singular, short names, categories — and, from a group version's own list, its
``storageVersionHash``.

The daemon reads it for the resources it caches that its built-in table does not describe (a
built-in kind outside it, a CRD's ``spec.names``), so that its own discovery says of them what
the API server says and a configuration may name a resource by ``GROUP/VERSION/PLURAL`` alone.
:func:`served_resources` reads every group at once, as kubectl does: aggregated discovery
(``apidiscovery.k8s.io`` v2, or v2beta1 on 1.27 to 1.29) in two requests where the server offers it,
else ``/api``, ``/apis`` and each group version's list. Every authenticated user may read
discovery (the ``system:discovery`` role): the daemon's own credentials do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import httpx

from cacheproxy.errors import CacheProxyError
from cacheproxy.kube.resources import GroupVersion, ResourceType
from cacheproxy.upstream.apilistwatch import send_for_json
from cacheproxy.upstream.client import LIST_TIMEOUT

__all__ = ["AGGREGATED_ACCEPT", "Discovered", "resource_types", "served_resources"]

AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)
"""kubectl's ``Accept`` for discovery: the aggregated documents, else the legacy ones."""


@dataclass
class Discovered:
    """What upstream's discovery said of every group version it serves."""

    resources: dict[GroupVersion, list[ResourceType]] = field(default_factory=dict)
    """The resources of each group version (subresources left out; only those that may be
    listed and watched when asked so)."""
    unanswered: dict[GroupVersion, CacheProxyError] = field(default_factory=dict)
    """Group versions upstream names but could not describe now (an aggregated API down)."""
    aggregated: bool = False
    """Read from aggregated discovery."""


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


async def served_resources(client: httpx.AsyncClient, *, verbs: Collection[str] = ()) -> Discovered:
    """Every resource upstream serves (with ``verbs``, only those that allow each of them).
    Raises CacheProxyError when upstream cannot say (``/api`` or ``/apis`` unanswered)."""
    documents = await asyncio.gather(_get(client, "/api"), _get(client, "/apis"))
    if all(_is_aggregated(doc) for doc in documents):
        served = Discovered(aggregated=True)
        for doc in documents:
            for group in doc.get("items") or ():
                _read_aggregated_group(served, group, verbs)
        return served
    core, groups = documents
    gvs = [GroupVersion("", str(v)) for v in core.get("versions") or ()]
    for group in groups.get("groups") or ():
        for version in group.get("versions") or ():
            gvs.append(GroupVersion(str(group.get("name", "")), str(version.get("version", ""))))
    answers = await asyncio.gather(
        *(resource_types(client, gv, verbs=verbs) for gv in gvs), return_exceptions=True
    )
    served = Discovered()
    for gv, answer in zip(gvs, answers, strict=True):
        if isinstance(answer, CacheProxyError):
            served.unanswered[gv] = answer
        elif isinstance(answer, BaseException):
            raise answer
        else:
            served.resources[gv] = answer
    return served


async def _get(client: httpx.AsyncClient, path: str) -> dict[str, Any]:
    request = client.build_request(
        "GET", path, headers={"Accept": AGGREGATED_ACCEPT}, timeout=LIST_TIMEOUT
    )
    body = await send_for_json(client, request)
    return body if isinstance(body, dict) else {}


def _is_aggregated(doc: dict[str, Any]) -> bool:
    return doc.get("kind") == "APIGroupDiscoveryList"


def _read_aggregated_group(
    served: Discovered, group: dict[str, Any], verbs: Collection[str]
) -> None:
    name = str((group.get("metadata") or {}).get("name") or "")
    for version in group.get("versions") or ():
        gv = GroupVersion(name, str(version.get("version", "")))
        served.resources[gv] = [
            _aggregated_resource_type(gv, entry)
            for entry in version.get("resources") or ()
            if isinstance(entry, dict) and set(verbs) <= set(entry.get("verbs") or ())
        ]


def _aggregated_resource_type(gv: GroupVersion, entry: dict[str, Any]) -> ResourceType:
    kind = str((entry.get("responseKind") or {}).get("kind", ""))
    return ResourceType(
        group=gv.group,
        version=gv.version,
        resource=str(entry["resource"]),
        kind=kind,
        namespaced=entry.get("scope") == "Namespaced",
        singular=str(entry.get("singularResource") or kind.lower()),
        short_names=tuple(str(n) for n in entry.get("shortNames") or ()),
        categories=tuple(str(c) for c in entry.get("categories") or ()),
    )


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
