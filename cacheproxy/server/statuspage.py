"""The JSON status page of the cache (``/status``, docs/design.md §4), for people at a terminal.

Per served resource: objects, bytes, the cache's resourceVersion, how long since upstream last
changed or refreshed it, relists, where its state came from (``state``: ``syncing``, ``restored``
from a snapshot, ``confirmed`` by upstream, ``synced`` from upstream), the reflector's phase, why upstream does not answer its lists or watches
(``lastError``: the request, code, message, how long and how often, what to do), the EventLog's
reach, watchers, evicted
watchers, and each index with its cardinality (the number of distinct values it holds). Built
from the same sources as ``/metrics`` (:class:`~cacheproxy.server.metrics.TrackedResource`), in
O(resources + indexes): it never walks the objects (except bytes in coalescing mode).

With pass-through on, ``readUpstream`` lists the resources most read through it — read from the
API server because they are not cached (reads in all, and in the last minute): what is worth
configuring (or what ``passthrough.autoCache`` picks); ``autoCached`` the resources it cached.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cacheproxy.server.failures import UpstreamFailures
from cacheproxy.server.forwarded import UpstreamRead
from cacheproxy.server.metrics import TrackedResource

__all__ = ["cache_status"]


def cache_status(
    tracked: Iterable[TrackedResource],
    *,
    ready: bool,
    now: float,
    pending: Mapping[str, str] | None = None,
    read_upstream: Sequence[tuple[UpstreamRead, int, int]] | None = None,
    auto_cached: Iterable[str] = (),
    failures: UpstreamFailures | None = None,
) -> dict[str, Any]:
    """The status document; ``now`` is read from the metrics' clock. ``pending``: configured
    resources not served yet, and why (a custom resource upstream's discovery has not
    described). ``read_upstream``: (resource, reads, reads in the last minute) of the most
    read through pass-through (None: pass-through is off)."""
    doc: dict[str, Any] = {
        "kind": "CacheStatus",
        "ready": ready,
        "resources": {t.name: _resource_status(t, now, failures) for t in tracked},
        "pending": dict(pending or {}),
    }
    if read_upstream is not None:
        doc["readUpstream"] = [
            {"resource": read.config_name, "reads": total, "lastMinute": recent}
            for read, total, recent in read_upstream
        ]
        doc["autoCached"] = sorted(auto_cached)
    return doc


def _resource_status(
    tracked: TrackedResource, now: float, failures: UpstreamFailures | None
) -> dict[str, Any]:
    res, stats, hub = tracked.resource, tracked.stats, tracked.hub
    failure = failures.of(tracked.name) if failures is not None else None
    informer = res.informer
    store = res.store
    event_log = informer.event_log
    since_change = stats.seconds_since_last_change(now)
    return {
        "group": res.rtype.group,
        "version": res.rtype.version,
        "resource": res.rtype.resource,
        "kind": res.rtype.kind,
        "synced": res.synced,
        "state": informer.state.value,
        "phase": informer.reflector.phase.value,
        "lastError": failure.document(now, tracked.name) if failure is not None else None,
        "objects": len(store),
        "bytes": stats.stored_bytes,
        "resourceVersion": str(store.resource_version),
        "secondsSinceLastEvent": None if since_change is None else round(since_change, 3),
        "stalenessSeconds": round(stats.staleness(now), 3),
        "events": dict(stats.events),
        "relists": max(0, informer.relists - 1),  # full lists after the first sync
        "eventLog": {
            "events": len(event_log),
            "oldestResumableResourceVersion": str(event_log.oldest_resumable),
        },
        "watchers": len(hub.watchers),
        "evicted": hub.evicted,
        "indexes": [
            {"path": name, "cardinality": len(store.index_values(name))}
            for name in store.index_names
        ],
    }
