"""Shared upstream questions of one resource's consistent reads (:mod:`.consistent`): one
request at a time, at most ``rate`` a second, each answer shared by every read that joined its
round; and what the reads did, for the metrics."""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["WAIT_BUCKETS", "ConsistencyStats", "SharedProbe", "count_listing"]

T = TypeVar("T")

WAIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
"""Upper bounds (seconds) of the wait-time histogram."""


@dataclass
class ConsistencyStats:
    """What one resource's consistent reads did (read by the metrics at scrape time)."""

    probes: int = 0
    probe_errors: int = 0
    reads: int = 0
    waits: int = 0
    """Reads that found the cache behind upstream and waited for it."""
    wait_seconds: float = 0.0
    wait_buckets: list[int] = field(default_factory=lambda: [0] * (len(WAIT_BUCKETS) + 1))
    """Reads by the time they waited (for the probe, then the cache; those that fell back
    included), per :data:`WAIT_BUCKETS` bound, then +Inf."""
    listings: int = 0
    """Lists of the collection's keys made to confirm the cache (one serves every read
    waiting)."""
    object_checks: int = 0
    """Gets that asked upstream for their object's resourceVersion to confirm the cache."""
    confirmed: int = 0
    """Reads whose cache a listing, or for a get its object's resourceVersion, confirmed (it
    had not reached the probed RV by its events)."""
    live: int = 0
    """Reads served from the cache as its live upstream watch keeps it (mode ``live``)."""
    forwarded: int = 0
    """Reads passed through to upstream because the cache could not prove itself fresh at a
    lower cost."""
    after_write: int = 0
    """Reads answered once the cache held a write that passed through the daemon just before,
    without asking upstream."""
    fallbacks: dict[str, int] = field(
        default_factory=lambda: {"probe_failed": 0, "probe_timeout": 0, "cache_behind": 0}
    )

    def waited(self, seconds: float) -> None:
        self.wait_seconds += seconds
        self.wait_buckets[bisect.bisect_left(WAIT_BUCKETS, seconds)] += 1


class SharedProbe(Generic[T]):
    """Upstream's answer about one resource (its current RV, or its listing), asked by one
    request at a time, at most ``rate``
    per second, each answer shared by every read that joined its round.

    :meth:`current` answers with the RV of a probe that *started after* it was called. Rounds:
    the reads waiting for the next probe share one future; when it starts (once the probe before
    has ended and ``1/rate`` s have passed since that one started), the next reads form a new
    round. ``clock`` and ``sleep`` are injectable (a fake clock in tests).
    """

    def __init__(
        self,
        probe: Callable[[], Awaitable[T]],
        *,
        rate: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        stats: ConsistencyStats | None = None,
        count: Callable[[ConsistencyStats], None] | None = None,
        name: str = "probe",
    ) -> None:
        self._probe = probe
        self._interval = 1.0 / rate if rate > 0 else 0.0
        self._clock = clock
        self._sleep = sleep
        self._next: asyncio.Future[T] | None = None
        self._runner: asyncio.Task[None] | None = None
        self._last_start: float | None = None
        self._in_flight: tuple[float, asyncio.Future[T]] | None = None
        """The round in flight: when it started, and its answer."""
        self.stats = stats or ConsistencyStats()
        self._count = count or _count_probe
        self.name = name

    @property
    def in_flight(self) -> bool:
        return self._runner is not None and not self._runner.done()

    def current(self, *, since: float | None = None) -> asyncio.Future[T]:
        """The next round's answer (shared: await it through ``asyncio.shield``) or, given
        ``since`` (a time on the clock), the answer of the round in flight if it started at or
        after then."""
        in_flight = self._in_flight
        if since is not None and in_flight is not None and in_flight[0] >= since:
            return in_flight[1]
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        if not self.in_flight:
            self._runner = asyncio.create_task(self._run(), name=f"consistent-{self.name}")
        return self._next

    async def _run(self) -> None:
        """Start the waiting rounds one after the other, until none waits."""
        while self._next is not None:
            if self._last_start is not None:
                delay = self._last_start + self._interval - self._clock()
                if delay > 0:
                    await self._sleep(delay)
            round_, self._next = self._next, None
            self._last_start = self._clock()
            self._in_flight = (self._last_start, round_)
            self._count(self.stats)
            try:
                answer = await self._probe()
            except asyncio.CancelledError:
                round_.cancel()
                raise
            except Exception as exc:  # every failure goes to the round's readers
                self.stats.probe_errors += 1
                if not round_.done():
                    round_.set_exception(exc)
                    round_.exception()  # retrieved here: a round nobody waits for is no error
                continue
            finally:
                self._in_flight = None
            if not round_.done():
                round_.set_result(answer)

    async def close(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        if self._next is not None:
            self._next.cancel()


def _count_probe(stats: ConsistencyStats) -> None:
    stats.probes += 1


def count_listing(stats: ConsistencyStats) -> None:
    stats.listings += 1
