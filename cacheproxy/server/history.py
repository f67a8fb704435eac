"""The last minutes of each cached resource, for the home page's charts and rates.

A :class:`History` takes a :class:`Sample` of every tracked resource every ``step`` seconds
(objects, changes applied, requests served, watchers, and the consistent reads' wait-time
buckets) and keeps the last ``window`` seconds of them: O(resources * window / step) memory
(15 minutes at 10 s: 90 small samples per resource), O(resources) per sample, nothing per event
or per request beyond the counters the metrics already keep.

Rates and quantiles are differences between two samples (the newest and the oldest in the span
asked for), so they describe the last minute or the last 15 minutes, not the daemon's whole
life. The page reads them with a sample taken at that moment as the newest (:meth:`now`), so a
daemon up for seconds already shows rates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from cacheproxy.server.metrics import ServerMetrics, TrackedResource
from cacheproxy.server.probing import WAIT_BUCKETS

__all__ = ["STEP_SECONDS", "WINDOW_SECONDS", "History", "Sample", "quantile"]

WINDOW_SECONDS: Final = 900.0
"""How far back the charts reach (15 minutes)."""
STEP_SECONDS: Final = 10.0
"""Seconds between two samples."""
CHANGES: Final = ("ADDED", "MODIFIED", "DELETED")


@dataclass(frozen=True, slots=True)
class Sample:
    """One resource at one moment; the counts are totals since it was first tracked."""

    at: float
    objects: int
    changes: int
    requests: int
    watchers: int
    waits: tuple[int, ...]
    """Consistent reads by the time they waited, per :data:`WAIT_BUCKETS` bound, then +Inf
    (all zeros for a resource that does not read consistently)."""


def _sample(tracked: TrackedResource, served: Mapping[str, float], at: float) -> Sample:
    consistency = tracked.resource.consistency
    waits = tuple(consistency.stats.wait_buckets) if consistency else (0,) * (len(WAIT_BUCKETS) + 1)
    return Sample(
        at=at,
        objects=len(tracked.resource.store),
        changes=sum(tracked.stats.events.get(kind, 0) for kind in CHANGES),
        requests=int(served.get(tracked.name, 0)),
        watchers=len(tracked.hub.watchers),
        waits=waits,
    )


def quantile(buckets: Sequence[int], q: float) -> float | None:
    """The upper bound of the :data:`WAIT_BUCKETS` bucket holding quantile ``q`` of the counts
    ``buckets`` (inf past the last bound; None with no count)."""
    total = sum(buckets)
    if not total:
        return None
    rank, seen = q * total, 0
    for bound, count in zip((*WAIT_BUCKETS, float("inf")), buckets, strict=True):
        seen += count
        if seen >= rank:
            return bound
    return float("inf")  # pragma: no cover - seen reaches total


class History:
    """The samples of ``metrics``' tracked resources over the last ``window`` seconds."""

    def __init__(
        self,
        metrics: ServerMetrics,
        *,
        window: float = WINDOW_SECONDS,
        step: float = STEP_SECONDS,
    ) -> None:
        self._metrics = metrics
        self.window = window
        self.step = step
        self._samples: dict[str, deque[Sample]] = {}
        self._task: asyncio.Task[None] | None = None

    def now(self, name: str) -> Sample | None:
        """A sample of ``name`` taken now (None: not tracked)."""
        tracked = self._metrics.tracked_named(name)
        if tracked is None:
            return None
        return _sample(tracked, self._metrics.requests_served(), self._metrics.clock())

    def sample(self) -> None:
        """Take one sample of every tracked resource (and forget those no longer tracked)."""
        now = self._metrics.clock()
        served = self._metrics.requests_served()
        names = set()
        for tracked in self._metrics.tracked:
            names.add(tracked.name)
            samples = self._samples.get(tracked.name)
            if samples is None:
                samples = self._samples[tracked.name] = deque(
                    maxlen=int(self.window / self.step) + 1
                )
            samples.append(_sample(tracked, served, now))
        for gone in self._samples.keys() - names:
            del self._samples[gone]

    def kept(self, name: str) -> list[Sample]:
        """``name``'s samples, oldest first (none taken now)."""
        return list(self._samples.get(name, ()))

    def series(self, name: str) -> list[Sample]:
        """``name``'s samples, oldest first, and one taken now."""
        latest = self.now(name)
        kept = list(self._samples.get(name, ()))
        if latest is None:
            return kept
        if kept and kept[-1].at >= latest.at:
            kept.pop()  # sampled this very moment: the newer counts
        return [*kept, latest]

    def since(self, name: str, seconds: float) -> tuple[Sample, Sample] | None:
        """The oldest sample of ``name`` within the last ``seconds`` and one taken now (None:
        not tracked, or sampled only now)."""
        series = self.series(name)
        if len(series) < 2:
            return None
        latest = series[-1]
        first = next((s for s in series if latest.at - s.at <= seconds), latest)
        if first is latest:
            first = series[-2]
        return first, latest

    def rates(self, name: str, seconds: float = 60.0) -> tuple[float, float] | None:
        """Changes and requests per second over (about) the last ``seconds``."""
        span = self.since(name, seconds)
        if span is None:
            return None
        first, latest = span
        elapsed = latest.at - first.at
        if elapsed <= 0:
            return None
        return (
            (latest.changes - first.changes) / elapsed,
            (latest.requests - first.requests) / elapsed,
        )

    def waits(self, name: str, seconds: float = WINDOW_SECONDS) -> list[int]:
        """Consistent reads by wait-time bucket over (about) the last ``seconds``."""
        span = self.since(name, seconds)
        if span is None:
            return [0] * (len(WAIT_BUCKETS) + 1)
        first, latest = span
        return [b - a for a, b in zip(first.waits, latest.waits, strict=True)]

    def start(self) -> None:
        """Sample every ``step`` seconds from now on, until :meth:`stop`."""
        if self._task is None:
            self.sample()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="history")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.step)
            self.sample()
