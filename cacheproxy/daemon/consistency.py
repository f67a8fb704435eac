"""A resource's consistent reads as the daemon wires them: the server's
:class:`~cacheproxy.server.consistent.ConsistentReads` over upstream's two questions (its current
resourceVersion, what the cached collection holds now, and for a get its object's
resourceVersion), counted in the upstream request metrics (``verb="probe"``, ``"confirm"`` and
``"confirm-get"``) beside the informer's lists and watches."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import httpx

from cacheproxy.daemon.upstreammetrics import metered
from cacheproxy.informer import Collection
from cacheproxy.server.consistent import ConsistencyOptions, ConsistentReads
from cacheproxy.server.metrics import ServerMetrics
from cacheproxy.upstream import CollectionKeys, ObjectVersions, ResourceVersionProbe

__all__ = ["consistent_reads"]

P = ParamSpec("P")
T = TypeVar("T")


def consistent_reads(
    client: httpx.AsyncClient,
    collection: Collection,
    options: ConsistencyOptions,
    metrics: ServerMetrics | None,
) -> ConsistentReads:
    """The consistent reads of ``collection``'s cache: the probe asks the collection's path
    without its selectors (the cheapest list with etcd's revision), the listing with them (it
    must hold what the cache holds)."""
    probe = ResourceVersionProbe(
        client, collection.rtype, namespace=collection.namespace, seconds=options.timeout
    )
    keys = CollectionKeys(
        client,
        collection.rtype,
        namespace=collection.namespace,
        label_selector=collection.label_selector,
        field_selector=collection.field_selector,
        seconds=options.timeout,
    )
    versions = ObjectVersions(client, collection.rtype, seconds=options.timeout)
    name = collection.name

    def counted(call: Callable[P, Awaitable[T]], verb: str) -> Callable[P, Awaitable[T]]:
        if metrics is None:
            return call
        return metered(call, informer=name, verb=verb, metrics=metrics)

    return ConsistentReads(
        counted(probe, "probe"),
        options,
        list_keys=counted(keys, "confirm"),
        object_version=counted(versions, "confirm-get"),
        name=name,
    )
