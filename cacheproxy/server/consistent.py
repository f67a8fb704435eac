"""Consistent reads from the cache: a list or get with ``resourceVersion`` unset sees every write
that completed upstream before it was asked (the API server's "Most Recent" contract).

The API server answers such reads from its watch cache (KEP-2340, ``WaitUntilFreshAndList``):
it asks etcd for its current revision, waits until the cache has reached it, then serves from
memory. cacheproxy does the same one hop further out:

1. **probe**: upstream's current resourceVersion for the resource, by the cheapest request that
   gives it (the daemon wires a ``limit=1`` list at RV unset of the cached collection: its list
   RV is etcd's current revision);
2. **wait** until the resource's cache RV reached it (its events or bookmarks move it), with the
   wait for RV=N of the not-older-than reads;
3. **serve** from the cache as it is then.

Probes are shared (:class:`SharedProbe`): the reads of one resource that arrive while no probe
has started join one round; a read that arrives while a probe is in flight waits for the *next*
round, since the in-flight probe may have been answered before the read's write (the API server
batches its progress requests the same way). So upstream sees at most one probe per resource at
a time, and at most ``probes_per_second``, however many clients read.

A resource nobody writes never gets there by its own events: upstream's RV moves with every write
to any resource (on a real cluster, leases every few seconds), its cache's only with its own events
and bookmarks. So when the cache has not reached the probed RV after ``confirm_after``, the read is
**confirmed** instead: one list of the collection's metadata at RV unset (:data:`ListKeys`, shared
by the reads waiting, like the probes), and the cache as it is serves if it holds exactly that
list's keys and no listed object is newer than the cache. That proves the cache *is* upstream's
state: every object still there was last written at or before the cache's RV, so the cache holds
it as it is now, and the keys are the same, so nothing was added or deleted since (a write between
the two leaves a newer object or one fewer key). The answer keeps the cache's RV: its state is the
state at that RV, and a watch from there receives whatever comes after. A resource that was
confirmed and has not moved since is confirmed at once, without a probe: its listing's RV is the
target. If the listing shows changes the cache has not seen, they are on their way: the read waits
for them (the cache reaching the newest listed object, then holding exactly the listed keys).

When upstream does not answer in time, or the cache does not catch up in time, the read is
answered by ``on_timeout``: from the cache as it is, with a ``Warning`` header saying so, or with
a 504.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Final, Generic, Literal, Protocol, TypeVar

from cacheproxy.errors import ApiError, CacheProxyError
from cacheproxy.kube import status
from cacheproxy.kube.listoptions import ListOptions
from cacheproxy.kube.rv import decode_continue

__all__ = [
    "SERVE_FROM_CACHE",
    "WAIT_BUCKETS",
    "ConsistencyOptions",
    "ConsistencyStats",
    "ConsistentReads",
    "KeyListing",
    "ListKeys",
    "OnTimeout",
    "ProbeRV",
    "SharedProbe",
    "is_consistent_get",
    "is_consistent_list",
    "is_consistent_watch",
]

log = logging.getLogger(__name__)

ProbeRV = Callable[[], Awaitable[int]]
"""Upstream's current resourceVersion of one resource (raises CacheProxyError when upstream
cannot say)."""


class KeyListing(Protocol):
    """Upstream's collection at one moment: what :data:`ListKeys` answers."""

    @property
    def resource_version(self) -> int:
        """The list's RV (etcd's revision when it was read)."""
        ...

    @property
    def keys(self) -> Collection[str]:
        """Every object's store key (``namespace/name``, or ``name`` when cluster-scoped)."""
        ...

    @property
    def newest(self) -> int:
        """The largest of the objects' resourceVersions (0 for none)."""
        ...


ListKeys = Callable[[], Awaitable[KeyListing]]
"""Upstream's collection now, at RV unset (raises CacheProxyError when upstream cannot say)."""

T = TypeVar("T")

OnTimeout = Literal["cache", "error"]
SERVE_FROM_CACHE: Final = "cache"
"""The default :data:`OnTimeout`: the cache as it is, with a ``Warning``."""

WAIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
"""Upper bounds (seconds) of the wait-time histogram."""


def is_consistent_list(opts: ListOptions) -> bool:
    """Whether the API server answers this list as a consistent read: RV unset (with or without
    ``limit``; ``resourceVersionMatch`` needs an RV), or a continue token that continues at the
    latest state (rv -1, what an expired token's 410 hands back)."""
    if opts.resource_version:
        return False
    if opts.continue_token:
        return decode_continue(opts.continue_token).resource_version == -1
    return True


def is_consistent_watch(opts: ListOptions) -> bool:
    """A watch with RV unset starts at the most recent state (the API server starts it from
    etcd): its initial events must hold every write before it, as a consistent list."""
    return not opts.resource_version


def is_consistent_get(resource_version: str) -> bool:
    """A get with RV unset is "Most Recent" (the API server reads etcd for it)."""
    return not resource_version


@dataclass(frozen=True, slots=True)
class ConsistencyOptions:
    probes_per_second: int = 10
    """At most this many probes of one resource per second (the API server's progress
    requests are batched at 10/s too)."""
    timeout: float = 3.0
    """A consistent read waits this long for the probe and the cache (the watch cache's 3 s)."""
    on_timeout: OnTimeout = SERVE_FROM_CACHE
    """``cache``: serve the cache as it is with a ``Warning``; ``error``: 504."""
    confirm_after: float = 0.1
    """A read whose cache has not reached the probed RV after this long is confirmed by a
    listing (when the resource has one; see the module). Its events normally arrive within
    milliseconds of the write: this is the wait after which a quiet resource is more likely than
    an event in flight."""


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
    confirmed: int = 0
    """Reads whose cache a listing confirmed (it had not reached the probed RV by its events)."""
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


class FreshCache(Protocol):
    """What a consistent read waits on: a cache with an RV that can be awaited, and whose keys
    can be compared with a listing's."""

    @property
    def resource_version(self) -> int: ...

    async def wait_for(self, rv: int, *, within: float | None = None) -> None: ...

    def holds_exactly(self, keys: Collection[str]) -> bool:
        """Whether the cache's keys are ``keys``, no more, no fewer."""
        ...


def _count_probe(stats: ConsistencyStats) -> None:
    stats.probes += 1


def _count_listing(stats: ConsistencyStats) -> None:
    stats.listings += 1


class ConsistentReads:
    """One resource's consistent reads (see the module): :meth:`ensure` returns once the cache
    holds every write upstream had when the read came, or as ``on_timeout`` says. Without
    ``list_keys``, a cache that does not reach the probed RV by its events waits out the
    timeout."""

    def __init__(
        self,
        probe: ProbeRV,
        options: ConsistencyOptions | None = None,
        *,
        list_keys: ListKeys | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        name: str = "probe",
    ) -> None:
        self.options = options = options or ConsistencyOptions()
        self.stats = ConsistencyStats()
        self._clock = clock
        self._sleep = sleep
        self.probe: SharedProbe[int] = SharedProbe(
            probe,
            rate=options.probes_per_second,
            clock=clock,
            sleep=sleep,
            stats=self.stats,
            name=name,
        )
        self.listing: SharedProbe[KeyListing] | None = None
        if list_keys is not None:
            self.listing = SharedProbe(
                list_keys,
                rate=options.probes_per_second,
                clock=clock,
                sleep=sleep,
                stats=self.stats,
                count=_count_listing,
                name=f"{name} listing",
            )
        self._confirmed_at: int | None = None
        """The cache's RV when a listing last confirmed it: while the cache stays there (nothing
        changed), the next read is confirmed at once, without a probe."""

    async def ensure(self, cache: FreshCache) -> bytes | None:
        """Wait until ``cache`` is as fresh as upstream now is. None when it is; a ``Warning``
        header's value when it is served as it is (``on_timeout: cache``); raises a 504 ApiError
        otherwise."""
        self.stats.reads += 1
        start = self._clock()
        try:
            return await self._ensure(cache, start, start + self.options.timeout)
        finally:
            self.stats.waited(self._clock() - start)

    async def _ensure(self, cache: FreshCache, start: float, deadline: float) -> bytes | None:
        if self.listing is not None and self._confirmed_at == cache.resource_version:
            self.stats.waits += 1
            return await self._confirm(cache, start, deadline, target=0)
        try:
            target = await self._within(self.probe.current(), self._left(deadline))
        except TimeoutError:
            return self._fallback("probe_timeout", "upstream did not tell its resourceVersion")
        except CacheProxyError as exc:
            log.debug("%s: consistent read: the probe failed: %s", self.probe.name, exc)
            return self._fallback("probe_failed", f"upstream could not be asked ({exc})")
        if cache.resource_version >= target:
            return None
        self.stats.waits += 1
        wait = self._left(deadline)
        if self.listing is not None:
            wait = min(wait, self.options.confirm_after)
        try:
            await cache.wait_for(target, within=wait)
            return None
        except ApiError:
            if self.listing is None or self._left(deadline) <= 0:
                return self._behind(cache, target)
        return await self._confirm(cache, start, deadline, target)

    async def _confirm(
        self, cache: FreshCache, start: float, deadline: float, target: int
    ) -> bytes | None:
        """Serve once the cache is upstream's state as a listing that started after the read
        came (``start``) shows it: it holds the listing's keys and no listed object is newer,
        or it reached the listing's RV (see the module)."""
        assert self.listing is not None
        try:
            answer = self.listing.current(since=start)
            listing = await self._within(answer, self._left(deadline))
        except TimeoutError:
            return self._fallback("probe_timeout", "upstream did not list the resource")
        except CacheProxyError as exc:
            log.debug("%s: consistent read: the listing failed: %s", self.listing.name, exc)
            return self._fallback("probe_failed", f"upstream could not be asked ({exc})")
        target = max(target, listing.resource_version)
        while True:
            rv = cache.resource_version
            if rv >= target:
                return None
            if listing.newest <= rv and cache.holds_exactly(listing.keys):
                self._confirmed_at = rv
                self.stats.confirmed += 1
                return None
            # Changes the cache has not seen yet: wait for the newest listed object, then for
            # each further move (a deletion shows only as one key fewer).
            try:
                await cache.wait_for(max(rv + 1, listing.newest), within=self._left(deadline))
            except ApiError:
                return self._behind(cache, target)

    def _left(self, deadline: float) -> float:
        return max(0.0, deadline - self._clock())

    def _behind(self, cache: FreshCache, target: int) -> bytes:
        return self._fallback(
            "cache_behind",
            f"the cache is at resourceVersion {cache.resource_version}, upstream at {target}",
        )

    async def _within(self, answer: asyncio.Future[T], seconds: float) -> T:
        """The shared ``answer``, or TimeoutError after ``seconds`` (on the injected clock)."""
        if answer.done():
            return answer.result()
        timer: asyncio.Future[None] = asyncio.ensure_future(self._sleep(seconds))
        try:
            await asyncio.wait((answer, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        if not answer.done():
            raise TimeoutError
        return answer.result()

    def _fallback(self, reason: str, why: str) -> bytes:
        self.stats.fallbacks[reason] += 1
        message = f"not a consistent read: {why} within {self.options.timeout:g}s"
        if self.options.on_timeout == "error":
            raise ApiError(
                status.status_body(
                    code=504,
                    reason="Timeout",
                    message=f"Timeout: {message}",
                    details={"retryAfterSeconds": 1},
                )
            )
        # RFC 7234 warn-code 299 ("miscellaneous persistent warning"), as the API server writes
        # its warnings; clients (kubectl, client-go) show or log them.
        return f'299 - "{message}; served from the cache as it is"'.encode()

    async def close(self) -> None:
        await self.probe.close()
        if self.listing is not None:
            await self.listing.close()
