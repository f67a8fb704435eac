"""The daemon's Prometheus metrics (docs/design.md §4 ``/metrics``; §7: staleness is reported).

One :class:`ServerMetrics` per CacheServer, with its own ``CollectorRegistry`` (never the
process-global default: tests run several daemons in one process, each with its own numbers).
It gathers three sources:

- the informer library's :class:`~cacheproxy.informer.instruments.InformerMetrics` protocol
  (upstream requests, relists, watch errors, events received), implemented with counters —
  the library itself never imports Prometheus;
- the server's requests: a count by verb/resource/code and a latency histogram, recorded once
  per request by ``CacheServer.__call__`` (:meth:`ServerMetrics.observe_request`);
- the state of each cached resource (objects, bytes, staleness, EventLog length, synced,
  watchers, evicted watchers), read at scrape time by a custom collector from the informer,
  its store and its WatchHub, plus a :class:`ResourceStats` kept incrementally by informer
  subscriber of its informer (O(1) per event), so a scrape costs O(resources), never O(objects).

Names are ``cacheproxy_<subsystem>_<what>_<unit>``. Label values are bounded: ``resource`` is a
tracked resource's config name (``pods``, ``apps/v1/deployments``), ``verb`` one of
:data:`VERBS`, ``code`` an HTTP status, reasons and event types come from fixed sets in the code.
Recording never raises into a request or into the informer's processing loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from cacheproxy.informer.events import Changed, InformerEvent, Progressed, Relisted
from cacheproxy.informer.informer import SharedInformer
from cacheproxy.server.consistent import WAIT_BUCKETS
from cacheproxy.server.failures import UpstreamFailures
from cacheproxy.server.resource import ServedResource
from cacheproxy.server.watchhub import WatchHub

__all__ = [
    "CONTENT_TYPE",
    "EVENT_TYPES",
    "RELIST_REASONS",
    "VERBS",
    "ResourceStats",
    "ServerMetrics",
    "TrackedResource",
]

log = logging.getLogger(__name__)

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
"""The text exposition format ``generate_latest`` writes."""

VERBS = frozenset(
    ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "other")
)
"""The ``verb`` label of served requests: the Kubernetes verbs (writes are refused, but counted
as what they asked for), and ``other`` for anything else."""

EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")

RELIST_REASONS = ("expired", "watch-error", "very-short-watch")
"""Why the reflector relists after its first sync (its ``RelistReason``): every served
resource reports each at 0 from the start, so a dashboard or an alert sees a zero, not nothing
(a unit test checks the reflector gives no other)."""

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""From sub-millisecond gets to the 3 s wait for a resourceVersion not reached yet."""


class ResourceStats:
    """What a scrape needs and the informer does not keep, fed inline as its subscriber.

    - ``stored_bytes``: the JSON bytes the store holds (entries' ``raw``; not the indexes or the
      Python objects around them), adjusted per event and recounted at each relist;
    - ``events``: changes and bookmarks applied, by type (a relist's difference counts as the
      changes it made: its new and changed objects, and the vanished ones as deletions);
    - ``last_heard_at``: when upstream last moved the cache (event, bookmark or relist) — the
      staleness clock (docs/design.md §7). Before the first sync it counts from when tracking began.

    It is one of its informer's subscribers (:mod:`cacheproxy.informer.events`).
    """

    def __init__(
        self, informer: SharedInformer, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = informer.store
        self._clock = clock
        self._bytes = self._count_bytes()
        self.events: dict[str, int] = dict.fromkeys(EVENT_TYPES, 0)
        self.started_at = clock()
        self.last_change_at: float | None = None
        self.last_heard_at: float | None = None
        informer.subscribe(self._observe)

    @property
    def stored_bytes(self) -> int:
        return self._bytes

    def staleness(self, now: float | None = None) -> float:
        """Seconds since upstream last moved the cache."""
        now = self._clock() if now is None else now
        since = self.last_heard_at if self.last_heard_at is not None else self.started_at
        return max(0.0, now - since)

    def seconds_since_last_change(self, now: float | None = None) -> float | None:
        if self.last_change_at is None:
            return None
        now = self._clock() if now is None else now
        return max(0.0, now - self.last_change_at)

    def _count_bytes(self) -> int:
        return sum(entry.size for entry in self._store.entries())

    # The subscriber runs inside the informer's processing loop: it must never raise.

    def _observe(self, event: InformerEvent) -> None:
        match event:
            case Changed():
                self._on_event(event)
            case Relisted():
                if not event.first:
                    self._on_difference(event)
                self._on_relist(event.rv)
            case Progressed():
                self._on_bookmark(event.rv)

    def _on_event(self, event: Changed) -> None:
        try:
            grown = 0 if event.type == "DELETED" else event.entry.size
            if event.prev is not None:
                grown -= event.prev.size
            self._bytes += grown
            self.events[event.type] = self.events.get(event.type, 0) + 1
            self.last_change_at = self.last_heard_at = self._clock()
        except Exception:  # pragma: no cover - defensive: metrics never break the informer
            log.debug("metrics: could not account for an event", exc_info=True)

    def _on_difference(self, difference: Relisted) -> None:
        try:
            events = self.events
            for _, prev in difference.changed:
                kind = "ADDED" if prev is None else "MODIFIED"
                events[kind] = events.get(kind, 0) + 1
            events["DELETED"] = events.get("DELETED", 0) + len(difference.gone)
            if difference.changed or difference.gone:
                self.last_change_at = self.last_heard_at = self._clock()
        except Exception:  # pragma: no cover - defensive
            log.debug("metrics: could not account for a relist's difference", exc_info=True)

    def _on_bookmark(self, rv: int) -> None:
        try:
            self.events["BOOKMARK"] += 1
            self.last_heard_at = self._clock()
        except Exception:  # pragma: no cover - defensive
            log.debug("metrics: could not account for a bookmark", exc_info=True)

    def _on_relist(self, rv: int) -> None:
        try:
            self._bytes = self._count_bytes()
            self.last_heard_at = self._clock()
        except Exception:  # pragma: no cover - defensive
            log.debug("metrics: could not account for a relist", exc_info=True)


@dataclass(frozen=True, slots=True)
class TrackedResource:
    """One served resource as metrics and the status page see it."""

    name: str
    """The ``resource`` label: the resource's config name."""
    resource: ServedResource
    hub: WatchHub
    stats: ResourceStats


class ServerMetrics:
    """The metrics of one daemon; also its informers' :class:`InformerMetrics`.

    ``track`` each served resource (the CacheServer does); ``exposition()`` is the ``/metrics``
    body.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry()
        self.clock = clock
        self.failures = UpstreamFailures(clock=clock)
        """Each resource's failing lists and watches (told by the daemon's ListerWatchers)."""
        self._tracked: dict[str, TrackedResource] = {}
        self._resource_of_informer: dict[str, str] = {}
        registry = self.registry
        self.upstream_requests = Counter(
            "cacheproxy_upstream_requests_total",
            "Requests made to the upstream API server: list pages and watches, and consistent "
            "reads' probes and confirmations (verb probe, confirm, confirm-get).",
            ["resource", "verb"],
            registry=registry,
        )
        self.upstream_responses = Counter(
            "cacheproxy_upstream_responses_total",
            "Upstream answers by HTTP code (a watch's code is the one it started with; "
            '"error" when the server could not be reached).',
            ["resource", "verb", "code"],
            registry=registry,
        )
        self.relists = Counter(
            "cacheproxy_informer_relists_total",
            "Full resynchronisations after the first sync, by reason.",
            ["resource", "reason"],
            registry=registry,
        )
        self.watch_errors = Counter(
            "cacheproxy_informer_watch_errors_total",
            "Upstream watches that ended with an error and were restarted, by reason.",
            ["resource", "reason"],
            registry=registry,
        )
        self.events_received = Counter(
            "cacheproxy_informer_events_total",
            "Events received on upstream watch streams (counted when each stream ends).",
            ["resource"],
            registry=registry,
        )
        self.http_requests = Counter(
            "cacheproxy_http_requests_total",
            "Requests served, by verb, resource and HTTP code (a watch is counted when it ends).",
            ["verb", "resource", "code"],
            registry=registry,
        )
        self.http_duration = Histogram(
            "cacheproxy_http_request_duration_seconds",
            "Time to serve a request (watches excluded: they last as long as the client asks), "
            "by verb, resource and code class.",
            ["verb", "resource", "code"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._request_children: dict[tuple[str, str, int], tuple[Counter, Histogram | None]] = {}
        self.http_rejected = Counter(
            "cacheproxy_http_rejected_total",
            "Requests refused by a limit or by access control, by reason (unauthenticated, "
            "forbidden, in_flight, watchers, watchers_per_user, url_too_long, "
            "headers_too_large, bad_request, header_timeout).",
            ["reason"],
            registry=registry,
        )
        self.auth_cache_lookups = Counter(
            "cacheproxy_auth_cache_lookups_total",
            "Authentication (cache=token) and authorization (cache=access) answers looked up, "
            "by whether the cache had them (result=hit|miss; a miss asks the upstream).",
            ["cache", "result"],
            registry=registry,
        )
        self.auth_review_duration = Histogram(
            "cacheproxy_auth_review_duration_seconds",
            "Time of a TokenReview (kind=token) or SubjectAccessReview (kind=access) upstream.",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        registry.register(_CacheCollector(self))

    # ------------------------------------------------------------------ access and limits

    def rejected(self, reason: str) -> None:
        self.http_rejected.labels(reason).inc()

    def auth_cache(self, cache: str, *, hit: bool) -> None:
        self.auth_cache_lookups.labels(cache, "hit" if hit else "miss").inc()

    def auth_review(self, kind: str, seconds: float) -> None:
        self.auth_review_duration.labels(kind).observe(seconds)

    # ------------------------------------------------------------------ resources

    def track(self, resource: ServedResource, hub: WatchHub) -> TrackedResource:
        """Report on ``resource`` (and label its informer's metrics with its config name)."""
        name = resource.rtype.config_name
        tracked = TrackedResource(
            name, resource, hub, ResourceStats(resource.informer, clock=self.clock)
        )
        self._tracked[name] = tracked
        self._resource_of_informer[resource.informer.name] = name
        for reason in RELIST_REASONS:
            self.relists.labels(name, reason)  # a sample at 0 until the first relist
        return tracked

    def untrack(self, resource: ServedResource) -> None:
        """Stop reporting on ``resource`` (no longer served)."""
        name = resource.rtype.config_name
        if name in self._tracked and self._tracked[name].resource is resource:
            del self._tracked[name]
            self._resource_of_informer.pop(resource.informer.name, None)

    @property
    def tracked(self) -> list[TrackedResource]:
        return list(self._tracked.values())

    def tracked_named(self, name: str) -> TrackedResource | None:
        return self._tracked.get(name)

    def resource_label(self, informer: str) -> str:
        # Untracked informers (library use) keep their own name: still one value per informer.
        return self._resource_of_informer.get(informer, informer)

    # ------------------------------------------------------------------ InformerMetrics

    def request(self, informer: str, verb: str) -> None:
        self.upstream_requests.labels(self.resource_label(informer), verb).inc()

    def relist(self, informer: str, reason: str) -> None:
        self.relists.labels(self.resource_label(informer), reason).inc()

    def watch_error(self, informer: str, reason: str) -> None:
        self.watch_errors.labels(self.resource_label(informer), reason).inc()

    def events(self, informer: str, count: int) -> None:
        if count:
            self.events_received.labels(self.resource_label(informer)).inc(count)

    def upstream_response(self, informer: str, verb: str, code: int | str) -> None:
        """One upstream answer (the daemon's metered ListerWatcher reports them)."""
        try:
            label = str(code) if isinstance(code, str) else _code_label(code)
            self.upstream_responses.labels(self.resource_label(informer), verb, label).inc()
        except Exception:  # pragma: no cover - defensive
            log.debug("metrics: could not record an upstream response", exc_info=True)

    # ------------------------------------------------------------------ served requests

    def observe_request(self, *, verb: str, resource: str, code: int, seconds: float) -> None:
        """One served request, once it is over. Never raises."""
        try:
            children = self._request_children.get((verb, resource, code))
            if children is None:
                children = self._children(verb, resource, code)
                if len(self._request_children) < 4096:
                    self._request_children[verb, resource, code] = children
            count, duration = children
            count.inc()
            if duration is not None:
                duration.observe(seconds)
        except Exception:  # pragma: no cover - defensive: metrics never break a request
            log.debug("metrics: could not record a request", exc_info=True)

    def _children(self, verb: str, resource: str, code: int) -> tuple[Counter, Histogram | None]:
        """The labelled series of one kind of request (looked up once: label values are
        bounded, so is this cache)."""
        if verb not in VERBS:
            verb = "other"
        if resource not in self._tracked:
            resource = ""
        code_label = _code_label(code)
        count = self.http_requests.labels(verb, resource, code_label)
        if verb == "watch":
            return count, None
        code_class = f"{code_label[0]}xx" if code_label.isdigit() else code_label
        return count, self.http_duration.labels(verb, resource, code_class)

    def requests_served(self) -> dict[str, float]:
        """Requests served so far per tracked resource (the sum of its request counters: read
        when the home page's history samples, never counted apart per request)."""
        served: dict[str, float] = {}
        for family in self.http_requests.collect():
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.labels["resource"] in self._tracked:
                    resource = sample.labels["resource"]
                    served[resource] = served.get(resource, 0.0) + sample.value
        return served

    def exposition(self) -> bytes:
        """The ``/metrics`` body (Prometheus text format, :data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)


def _code_label(code: int) -> str:
    # Exact codes: the server writes a dozen of them, upstream HTTP codes are three digits.
    return str(code) if 100 <= code <= 599 else "none"


class _CacheCollector:
    """Gauges and counters read from the tracked resources at scrape time."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return list(self._families())

    def _families(self) -> Iterator[Metric]:
        tracked = self._metrics.tracked
        now = self._metrics.clock()

        def gauge(name: str, doc: str, value: Callable[[TrackedResource], float]) -> Metric:
            family = GaugeMetricFamily(name, doc, labels=["resource"])
            for t in tracked:
                family.add_metric([t.name], value(t))
            return family

        def counter(name: str, doc: str, value: Callable[[TrackedResource], float]) -> Metric:
            family = CounterMetricFamily(name, doc, labels=["resource"])
            for t in tracked:
                family.add_metric([t.name], value(t))
            return family

        yield gauge(
            "cacheproxy_cache_objects", "Objects in the cache.", lambda t: len(t.resource.store)
        )
        yield gauge(
            "cacheproxy_cache_bytes",
            "JSON bytes of the objects in the cache (indexes and object overhead excluded).",
            lambda t: t.stats.stored_bytes,
        )
        yield gauge(
            "cacheproxy_cache_packed_bytes",
            "Bytes the compressed objects take (resources with storage.compressed; else 0).",
            lambda t: t.resource.store.packed_bytes,
        )
        yield gauge(
            "cacheproxy_cache_staleness_seconds",
            "Seconds since upstream last moved the cache (event, bookmark or relist).",
            lambda t: t.stats.staleness(now),
        )
        yield gauge(
            "cacheproxy_cache_synced",
            "1 once the resource has synced (lists and watches are served), else 0.",
            lambda t: 1.0 if t.resource.synced else 0.0,
        )
        yield gauge(
            "cacheproxy_watch_live",
            "1 while the resource's upstream watch is live (its stream open, or reopening), "
            "else 0: reads with resourceVersion unset in the default live mode are then proven "
            "or forwarded, not served as the cache is.",
            lambda t: 1.0 if t.resource.informer.watch_live else 0.0,
        )
        yield gauge(
            "cacheproxy_cache_eventlog_events",
            "Events held for watch resumes and exact-RV lists.",
            lambda t: len(t.resource.informer.event_log),
        )
        events = CounterMetricFamily(
            "cacheproxy_cache_events",
            "Changes and bookmarks applied to the cache, by type.",
            labels=["resource", "type"],
        )
        for t in tracked:
            for event_type, count in t.stats.events.items():
                events.add_metric([t.name, event_type], count)
        yield events
        yield gauge(
            "cacheproxy_watch_watchers", "Open watches served.", lambda t: len(t.hub.watchers)
        )
        yield from _consistency_families(tracked)
        evicted = CounterMetricFamily(
            "cacheproxy_watch_evicted",
            "Watchers closed because they fell behind, by reason: events (watchBuffer events "
            "queued), bytes (watchBufferBytes queued), total_bytes (the most queued when the "
            "lines queued for all watchers, each counted once, passed watchBuffersTotalBytes), "
            "stall (took nothing for watchStallSeconds).",
            labels=["resource", "reason"],
        )
        for t in tracked:
            for reason, count in t.hub.evictions.items():
                evicted.add_metric([t.name, reason], count)
        yield evicted
        yield counter(
            "cacheproxy_watch_events_delivered",
            "Event lines queued to watchers.",
            lambda t: t.hub.delivered,
        )


_CONSISTENCY_COUNTERS: Final = {
    "probes": "Requests for upstream's current resourceVersion (one serves every read waiting).",
    "probe_errors": "Probes and confirmations upstream did not answer.",
    "reads": "Lists, gets and watches with resourceVersion unset answered as consistent reads.",
    "waits": "Consistent reads that found the cache behind upstream and waited for it.",
    "listings": "Metadata lists of the resource made to confirm a cache its events had not "
    "brought to upstream's resourceVersion (one serves every read waiting).",
    "object_checks": "Gets that asked upstream for their object's resourceVersion to confirm a "
    "cache its events had not brought to upstream's resourceVersion.",
    "confirmed": "Consistent reads served because a listing (a get: its object's "
    "resourceVersion) showed the cache holds what upstream holds (nothing written since).",
    "live": "Reads with resourceVersion unset served from the cache as its live upstream "
    "watch keeps it (consistentReads: live; stale by the watch's delivery lag at most).",
    "forwarded": "Reads with resourceVersion unset passed through to upstream as their caller "
    "because the cache could not prove itself fresh at a lower cost.",
    "after_write": "Consistent reads answered once the cache held a write that passed through "
    "the daemon just before, without asking upstream.",
}
"""The consistent reads' counters (``cacheproxy_consistent_<name>``): ConsistencyStats fields."""


def _consistency_families(tracked: list[TrackedResource]) -> Iterator[Metric]:
    """Consistent reads (:mod:`.consistent`), for the resources that read consistently."""
    stats = [(t.name, t.resource.consistency.stats) for t in tracked if t.resource.consistency]
    families = {
        attr: CounterMetricFamily(f"cacheproxy_consistent_{attr}", doc, labels=["resource"])
        for attr, doc in _CONSISTENCY_COUNTERS.items()
    }
    fallbacks = CounterMetricFamily(
        "cacheproxy_consistent_fallbacks",
        "Consistent reads that timed out (answered as server.limits.consistentReadFallback "
        "says), by reason (probe_failed, probe_timeout, cache_behind).",
        labels=["resource", "reason"],
    )
    wait = HistogramMetricFamily(
        "cacheproxy_consistent_wait_seconds",
        "Time a consistent read waited: the probe, then the cache reaching its resourceVersion.",
        labels=["resource"],
    )
    for name, s in stats:
        for attr, family in families.items():
            family.add_metric([name], getattr(s, attr))
        for reason, count in s.fallbacks.items():
            fallbacks.add_metric([name, reason], count)
        cumulative, buckets = 0, []
        for bound, count in zip([*map(str, WAIT_BUCKETS), "+Inf"], s.wait_buckets, strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        wait.add_metric([name], buckets, s.wait_seconds)
    yield from families.values()
    yield fallbacks
    yield wait
