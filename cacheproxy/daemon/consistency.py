"""A resource's consistent reads as the daemon wires them: the server's
:class:`~cacheproxy.server.consistent.ConsistentReads` over upstream's two questions (its current
resourceVersion, what the cached collection holds now, and for a get its object's
resourceVersion), counted in the upstream request metrics (``verb="probe"``, ``"confirm"`` and
``"confirm-get"``) beside the informer's lists and watches."""

from __future__ import annotations

import httpx

from cacheproxy.daemon.metrics import metered
from cacheproxy.informer import Collection
from cacheproxy.server.consistent import ConsistencyOptions, ConsistentReads
from cacheproxy.server.metrics import ServerMetrics
from cacheproxy.upstream import CollectionKeys, ObjectVersions, ResourceVersionProbe

__all__ = ["consistent_reads"]


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
    if metrics is None:
        return ConsistentReads(
            probe, options, list_keys=keys, object_version=versions, name=collection.name
        )
    name = collection.name
    return ConsistentReads(
        metered(probe, informer=name, verb="probe", metrics=metrics),
        options,
        list_keys=metered(keys, informer=name, verb="confirm", metrics=metrics),
        object_version=metered(versions, informer=name, verb="confirm-get", metrics=metrics),
        name=name,
    )
