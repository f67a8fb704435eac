"""What pass-through forwarded, told: the ``cacheproxy_passthrough_*`` metrics, and the tally of
reads of what the cache does not hold — on ``/status`` and the home page as "read upstream, not
cached", and what ``passthrough.autoCache`` picks resources to cache from."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter

__all__ = [
    "DURATION_BUCKETS",
    "AutoCacheOptions",
    "PassThroughMetrics",
    "ReadTally",
    "UpstreamRead",
]

log = logging.getLogger(__name__)

MAX_LABELS: Final = 1_000
"""Distinct ``resource`` values kept (metric labels, tallied resources); more are ``other`` in
the metrics and not tallied (the names come from callers: a bound keeps a scan of made-up paths
from growing either)."""

DURATION_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


@dataclass(slots=True)
class _Labels:
    """The metrics' children of one (verb, resource), looked up once."""

    requests: dict[str, PromCounter] = field(default_factory=dict)
    duration: Histogram | None = None


class PassThroughMetrics:
    """``cacheproxy_passthrough_*``: forwarded requests by verb, resource and code, their
    latency (long-running ones excluded), those in flight, and refusals."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.requests = PromCounter(
            "cacheproxy_passthrough_requests_total",
            "Requests forwarded to the upstream API server (what the cache does not answer), by "
            'verb, resource ("" for non-resource paths) and HTTP code ("error" when upstream '
            "could not be reached or the caller went away first).",
            ["verb", "resource", "code"],
            registry=registry,
        )
        self.duration = Histogram(
            "cacheproxy_passthrough_request_duration_seconds",
            "Time from a forwarded request's arrival to the end of its answer (long-running "
            "requests excluded: watches, logs, exec, attach, port-forward, proxy).",
            ["verb", "resource"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.write_settle = Histogram(
            "cacheproxy_passthrough_write_settle_seconds",
            "How long the answers of writes to cached resources were held until the cache held "
            "the write (server.limits.writeSettleSeconds), by resource and outcome (settled, or "
            "timeout: answered anyway).",
            ["resource", "outcome"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "cacheproxy_passthrough_in_flight",
            "Forwarded requests being served now, by kind (short, long_running).",
            ["kind"],
            registry=registry,
        )
        self.in_flight_of = {
            kind: self.in_flight.labels(kind) for kind in ("short", "long_running")
        }
        """The gauge's children, looked up once."""
        self._labels: dict[tuple[str, str], _Labels] = {}

    def observe(self, verb: str, resource: str, code: str, seconds: float | None) -> None:
        try:
            key = (verb, resource)
            children = self._labels.get(key)
            if children is None:
                if len(self._labels) >= MAX_LABELS:
                    key = (verb, "other")
                children = self._labels.setdefault(key, _Labels())
            counter = children.requests.get(code)
            if counter is None:
                counter = children.requests[code] = self.requests.labels(*key, code)
            counter.inc()
            if seconds is not None:
                if children.duration is None:
                    children.duration = self.duration.labels(*key)
                children.duration.observe(seconds)
        except Exception:  # pragma: no cover - defensive: metrics never break a request
            log.debug("metrics: could not record a forwarded request", exc_info=True)


@dataclass(frozen=True, slots=True, order=True)
class UpstreamRead:
    """A resource read through pass-through (a get, list or watch, no subresource)."""

    group: str
    version: str
    resource: str

    @property
    def label(self) -> str:
        """``pods``, ``deployments.apps``: the metrics' ``resource`` label."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def config_name(self) -> str:
        """How a configuration names it: ``v1/secrets`` → ``secrets`` for the core group,
        ``apps/v1/deployments``."""
        return f"{self.group}/{self.version}/{self.resource}" if self.group else self.resource


@dataclass(slots=True)
class _Count:
    total: int = 0
    seconds: deque[list[int]] = field(default_factory=deque)
    """``[second, reads]`` of the last :attr:`ReadTally.window` seconds."""


@dataclass(frozen=True, slots=True)
class AutoCacheOptions:
    """What makes ``passthrough.autoCache`` (:mod:`cacheproxy.daemon.autocache`) cache a
    resource read through pass-through, and drop it again."""

    reads_per_minute: int = 30
    max_resources: int = 5
    idle: float = 600.0
    sync_within: float = 60.0
    interval: float = 10.0


class ReadTally:
    """Forwarded reads by resource: how many in all, and in the last ``window`` seconds."""

    def __init__(
        self, *, window: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window = window
        self._clock = clock
        self._counts: dict[UpstreamRead, _Count] = {}

    def add(self, read: UpstreamRead) -> None:
        count = self._counts.get(read)
        if count is None:
            if len(self._counts) >= MAX_LABELS:
                return
            count = self._counts[read] = _Count()
        count.total += 1
        now = int(self._clock())
        if count.seconds and count.seconds[-1][0] == now:
            count.seconds[-1][1] += 1
        else:
            count.seconds.append([now, 1])
        self._trim(count, now)

    def recent(self, read: UpstreamRead) -> int:
        """Reads of ``read`` in the last window."""
        count = self._counts.get(read)
        if count is None:
            return 0
        self._trim(count, int(self._clock()))
        return sum(n for _, n in count.seconds)

    def top(self, n: int = 10) -> list[tuple[UpstreamRead, int, int]]:
        """The ``n`` most read: (resource, reads in all, reads in the last window)."""
        ranked = sorted(self._counts.items(), key=lambda item: (-item[1].total, item[0]))
        return [(read, count.total, self.recent(read)) for read, count in ranked[:n]]

    def hot(self, threshold: int) -> list[UpstreamRead]:
        """The resources read at least ``threshold`` times in the last window, most first."""
        rates = [(self.recent(read), read) for read in self._counts]
        return [
            read for rate, read in sorted(rates, key=lambda r: (-r[0], r[1])) if rate >= threshold
        ]

    def forget(self, read: UpstreamRead) -> None:
        """Start ``read``'s count anew (it is cached now: its reads are no longer forwarded)."""
        self._counts.pop(read, None)

    def _trim(self, count: _Count, now: int) -> None:
        oldest = now - self.window
        while count.seconds and count.seconds[0][0] <= oldest:
            count.seconds.popleft()
