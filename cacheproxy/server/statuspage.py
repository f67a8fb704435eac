"""The JSON status page of the cache (``/status``, docs/design.md §4), for people at a terminal.

The daemon (``daemon``: its version and uptime) and its upstream (``upstream``: URL, version,
whether it is reachable, the most recent failure of any resource). Per served resource:
objects, bytes, the cache's resourceVersion, how long since upstream last changed or refreshed
it, relists, where its state came from (``state``: ``syncing``, ``restored`` from a snapshot,
``confirmed`` by upstream, ``synced`` from upstream), the reflector's phase, why upstream does
not answer its lists or watches (``lastError``: the request, code, message, how long and how
often, what to do), the EventLog's reach, watchers, evicted watchers, each index with its
cardinality (the number of distinct values it holds), the last minute's changes and requests
per second, and the last 15 minutes' consistent reads with their wait quantiles (the upper
bound of the histogram bucket holding each; :mod:`.history`). Built from the same sources as
``/metrics`` (:class:`~cacheproxy.server.metrics.TrackedResource`), in O(resources + indexes):
it never walks the objects.

With pass-through on, ``readUpstream`` lists the resources most read through it — read from the
API server because they are not cached (reads in all, and in the last minute): what is worth
configuring (or what ``passthrough.autoCache`` picks); ``autoCached`` the resources it cached.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cacheproxy import __version__
from cacheproxy.server.failures import UpstreamFailures
from cacheproxy.server.forwarded import UpstreamRead
from cacheproxy.server.history import History, quantile
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
    history: History | None = None,
    upstream: str = "",
    upstream_version: Mapping[str, Any] | None = None,
    uptime: float = 0.0,
) -> dict[str, Any]:
    """The status document; ``now`` is read from the metrics' clock. ``pending``: configured
    resources not served yet, and why (a custom resource upstream's discovery has not
    described). ``read_upstream``: (resource, reads, reads in the last minute) of the most
    read through pass-through (None: pass-through is off). ``history``: the source of the
    rates and the consistent reads' wait quantiles. ``upstream``: the API server's URL;
    ``upstream_version``: its ``/version`` (empty until it answered)."""
    doc: dict[str, Any] = {
        "kind": "CacheStatus",
        "ready": ready,
        "daemon": {"version": __version__, "uptimeSeconds": round(uptime, 3)},
        "upstream": _upstream_status(upstream, upstream_version or {}, failures, now),
        "resources": {t.name: _resource_status(t, now, failures, history) for t in tracked},
        "pending": dict(pending or {}),
    }
    if read_upstream is not None:
        doc["readUpstream"] = [
            {"resource": read.config_name, "reads": total, "lastMinute": recent}
            for read, total, recent in read_upstream
        ]
        doc["autoCached"] = sorted(auto_cached)
    return doc


def _upstream_status(
    server: str, version: Mapping[str, Any], failures: UpstreamFailures | None, now: float
) -> dict[str, Any]:
    """Where upstream is, its version, whether it answers (it answered ``/version`` and no
    resource's requests fail to reach it), and the most recent failure of any resource."""
    failing = failures.failing() if failures is not None else {}
    latest = max(failing.items(), key=lambda item: item[1].since, default=None)
    unreachable = any(f.code is None for f in failing.values())
    return {
        "server": server,
        "version": version.get("gitVersion"),
        "reachable": bool(version) and not unreachable,
        "lastError": (
            {"resource": latest[0], **latest[1].document(now, latest[0])} if latest else None
        ),
    }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _bound(value: float | None) -> float | None:
    """A wait quantile's bucket bound; None past the last bound (or with no read)."""
    return None if value is None or value == float("inf") else value


def _resource_status(
    tracked: TrackedResource,
    now: float,
    failures: UpstreamFailures | None,
    history: History | None,
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
        "storage": {
            "compressed": store.packer is not None,
            "trained": store.packer is not None and store.packer.ready,
            "packedBytes": store.packed_bytes,
        },
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
        "evictedBy": dict(hub.evictions),
        **_recent(tracked, history),
        "indexes": [
            {"path": name, "cardinality": len(store.index_values(name))}
            for name in store.index_names
        ],
    }


def _recent(tracked: TrackedResource, history: History | None) -> dict[str, Any]:
    """The last minute's rates and the last 15 minutes' consistent reads, from ``history``."""
    if history is None:
        return {}
    rates = history.rates(tracked.name)
    events, requests = rates if rates is not None else (None, None)
    waits = history.waits(tracked.name)
    return {
        "eventsPerSecond": _rounded(events, 3),
        "requestsPerSecond": _rounded(requests, 3),
        "consistentReads": {
            "reads": sum(waits),
            "waitP50Seconds": _bound(quantile(waits, 0.5)),
            "waitP99Seconds": _bound(quantile(waits, 0.99)),
        }
        if tracked.resource.consistency is not None
        else None,
    }
