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
the two leaves a newer object or one fewer key). The answer carries the listing's RV
(:attr:`Fresh.confirmed_at`; the served resource remembers which state it confirmed, so reads at
that RV get that state), and a watch from there receives whatever comes after. A resource that was
confirmed and has not moved since is confirmed at once, without a probe: its listing's RV is the
target. If the listing shows changes the cache has not seen, they are on their way: the read waits
for them (the cache reaching the newest listed object, then holding exactly the listed keys).

When upstream does not answer in time, or the cache does not catch up in time, the read is
answered by ``on_timeout``: from the cache as it is, with a ``Warning`` header saying so, or with
a 504.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeVar

from cacheproxy.errors import ApiError, CacheProxyError
from cacheproxy.kube import status
from cacheproxy.kube.listoptions import EXACT, ListOptions
from cacheproxy.kube.rv import decode_continue
from cacheproxy.server.probing import WAIT_BUCKETS, ConsistencyStats, SharedProbe, count_listing

__all__ = [
    "SERVE_FROM_CACHE",
    "WAIT_BUCKETS",
    "ConsistencyOptions",
    "ConsistencyStats",
    "ConsistentReads",
    "Fresh",
    "KeyListing",
    "ListKeys",
    "ObjectKey",
    "ObjectVersion",
    "OnTimeout",
    "ProbeRV",
    "SharedProbe",
    "is_consistent_get",
    "is_consistent_list",
    "is_consistent_watch",
    "not_older_than",
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

ObjectVersion = Callable[[str | None, str], Awaitable[int]]
"""Upstream's resourceVersion of one object (namespace or None, name) now; a missing object
raises the API server's 404 ApiError (other failures: CacheProxyError)."""

OnTimeout = Literal["cache", "error"]
SERVE_FROM_CACHE: Final = "cache"
"""The default :data:`OnTimeout`: the cache as it is, with a ``Warning``."""


def is_consistent_list(opts: ListOptions) -> bool:
    """Whether the API server answers this list as a consistent read: RV unset (with or without
    ``limit``; ``resourceVersionMatch`` needs an RV), or a continue token that continues at the
    latest state (rv -1, what an expired token's 410 hands back)."""
    if opts.resource_version:
        return False
    if opts.continue_token:
        try:
            return decode_continue(opts.continue_token).resource_version == -1
        except ApiError:
            return False  # the list refuses it, in its upstream's words
    return True


def is_consistent_watch(opts: ListOptions) -> bool:
    """A watch with RV unset starts at the most recent state (the API server starts it from
    etcd): its initial events must hold every write before it, as a consistent list."""
    return not opts.resource_version


def not_older_than(opts: ListOptions) -> int:
    """N for a list or get at ``resourceVersion=N`` not older than (the cache's state once it
    reached N): what another replica's RV asks; 0 for any other read (an ``Exact`` one, or a
    ``limit`` with RV=N, which the API server answers at exactly N, or a continue)."""
    if opts.rv <= 0 or opts.continue_token or opts.resource_version_match == EXACT:
        return 0
    if opts.limit > 0 and not opts.resource_version_match:
        return 0
    return opts.rv


def is_consistent_get(resource_version: str) -> bool:
    """A get with RV unset is "Most Recent" (the API server reads etcd for it)."""
    return not resource_version


@dataclass(frozen=True, slots=True)
class ConsistencyOptions:
    probes_per_second: int = 100
    """At most this many probes of one resource per second, one at a time: a read that comes
    while none is in flight starts one at once, the reads that come while one is share the
    next, which starts when it returned (and ``1/probes_per_second`` after it started)."""
    timeout: float = 3.0
    """A consistent read waits this long for the probe and the cache (the watch cache's 3 s)."""
    on_timeout: OnTimeout = SERVE_FROM_CACHE
    """``cache``: serve the cache as it is with a ``Warning``; ``error``: 504."""
    confirm_after: float = 0.1
    """A list whose cache has not reached the probed RV after this long is confirmed by a
    listing (when the resource has one; see the module). Its events normally arrive within
    milliseconds of the write: this is the wait after which a quiet resource is more likely than
    an event in flight. A get is confirmed by its object at once (one small request)."""
    after_write: float = 1.0
    """For this long after a write through the daemon (:meth:`wrote`), a read waits for the
    cache to hold that write instead of asking upstream (read-your-writes at no upstream
    cost; other writes in that window show once their events came). 0: never."""


class FreshCache(Protocol):
    """What a consistent read waits on: a cache with an RV that can be awaited, and whose keys
    can be compared with a listing's."""

    @property
    def resource_version(self) -> int: ...

    async def wait_for(self, rv: int, *, within: float | None = None) -> None: ...

    def holds_exactly(self, keys: Collection[str]) -> bool:
        """Whether the cache's keys are ``keys``, no more, no fewer."""
        ...

    def object_version(self, key: str) -> int | None:
        """The resourceVersion of the object the cache holds at ``key`` (None: none)."""
        ...

    def confirmed(self, upstream_rv: int, cache_rv: int) -> None:
        """A listing at ``upstream_rv`` confirmed the cache's state at ``cache_rv``."""
        ...


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """The object a get reads: its namespace (None: cluster-scoped) and name, and its key in
    the cache."""

    namespace: str | None
    name: str
    key: str


class _NotConsistent(Exception):
    """Why a read could not be made consistent in time."""


@dataclass(frozen=True, slots=True)
class Fresh:
    """How a consistent read may be served (:meth:`ConsistentReads.read`)."""

    warning: bytes | None = None
    """A ``Warning`` header's value: the cache could not be confirmed in time and is served as
    it is (``on_timeout: cache``)."""
    confirmed_at: int | None = None
    """Set when a listing confirmed the cache: the listing's RV. The cache's state is upstream's
    there (:meth:`FreshCache.confirmed` was told), so a list carries that RV (the cache's own is
    older: nothing changed since but what a later event undoes; a watch from it skips those)."""


FRESH: Final = Fresh()
"""The cache reached upstream's RV by its events (or a get's object was confirmed)."""


class ConsistentReads:
    """One resource's consistent reads (see the module): :meth:`read` returns once the cache
    holds every write upstream had when the read came, or as ``on_timeout`` says. Without
    ``list_keys``, a cache that does not reach the probed RV by its events waits out the
    timeout."""

    def __init__(
        self,
        probe: ProbeRV,
        options: ConsistencyOptions | None = None,
        *,
        list_keys: ListKeys | None = None,
        object_version: ObjectVersion | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        name: str = "probe",
    ) -> None:
        self.options = options = options or ConsistencyOptions()
        self.stats = ConsistencyStats()
        self._clock = clock
        self._sleep = sleep

        def shared(ask: Callable[[], Awaitable[T]], **how: Any) -> SharedProbe[T]:
            rate = options.probes_per_second
            return SharedProbe(ask, rate=rate, clock=clock, sleep=sleep, stats=self.stats, **how)

        self.probe: SharedProbe[int] = shared(probe, name=name)
        self.listing: SharedProbe[KeyListing] | None = None
        if list_keys is not None:
            self.listing = shared(list_keys, count=count_listing, name=f"{name} listing")
        self._object_version = object_version
        self._written, self._written_at = 0, float("-inf")
        """The newest resourceVersion a write through the daemon returned, and when."""
        self._quiet_at: int | None = None
        """The cache's RV when a read last found that its events did not bring it to upstream's:
        while the cache stays there (nothing changed), the next read is confirmed at once (a
        listing, or a get's object), without a probe."""

    def wrote(self, rv: int) -> None:
        """A write to the resource passed through the daemon and upstream answered it at
        ``rv``: the reads that follow wait for the cache to hold it (see ``after_write``)."""
        if rv > self._written or self._clock() - self._written_at > self.options.after_write:
            self._written = rv
        self._written_at = self._clock()

    async def read(
        self,
        cache: FreshCache,
        *,
        get: ObjectKey | None = None,
        at_least: int | None = None,
        within: float | None = None,
    ) -> Fresh:
        """Wait until ``cache`` is as fresh as upstream now is (for a ``get``: its object): how
        the read may be served. A ``Warning`` when it is served as it is (``on_timeout:
        cache``); raises a 504 ApiError otherwise.

        ``at_least``: a read at ``resourceVersion=N`` (not older than) the cache has not reached
        (an RV from another replica): no probe (N is the target), confirmed as a quiet cache
        would be, and never served older: the API server's 504 "too large resource version"
        when the cache is not confirmed ``within`` s (by default the consistent reads'
        timeout)."""
        self.stats.reads += 1
        start = self._clock()
        deadline = start + (self.options.timeout if within is None else within)
        try:
            return await self._ensure(cache, get, at_least, start, deadline)
        except _NotConsistent as failed:
            why = str(failed)
        finally:
            self.stats.waited(self._clock() - start)
        if at_least is not None:
            raise status.too_large_resource_version(at_least, cache.resource_version)
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
        return Fresh(warning=f'299 - "{message}; served from the cache as it is"'.encode())

    async def _ensure(
        self,
        cache: FreshCache,
        get: ObjectKey | None,
        at_least: int | None,
        start: float,
        deadline: float,
    ) -> Fresh:
        by_object = get is not None and self._object_version is not None
        if at_least is not None:
            return await self._ensure_at(cache, get, at_least, start, deadline)
        if start - self._written_at <= self.options.after_write:
            # Just after a write through the daemon: its RV is the target (a collection whose
            # selector never gets its event asks upstream).
            with contextlib.suppress(ApiError):
                within = min(self.options.confirm_after, self._left(deadline))
                await cache.wait_for(self._written, within=within)
                self.stats.after_write += 1
                return FRESH
        if self._quiet_at == cache.resource_version and (by_object or self.listing is not None):
            self.stats.waits += 1
            if get is not None and by_object:
                return await self._confirm_object(cache, get, deadline)
            return await self._confirm(cache, start, deadline, target=0)
        try:
            target = await self._within(self.probe.current(), self._left(deadline))
        except TimeoutError:
            raise self._fallback(
                "probe_timeout", "upstream did not tell its resourceVersion"
            ) from None
        except CacheProxyError as exc:
            log.debug("%s: consistent read: the probe failed: %s", self.probe.name, exc)
            raise self._fallback("probe_failed", f"upstream could not be asked ({exc})") from None
        if cache.resource_version >= target:
            return FRESH
        self.stats.waits += 1
        if get is not None and by_object:
            # Its object says it at the cost of one small request, sooner than the events of a
            # resource that may be quiet: asked at once.
            self._quiet_at = cache.resource_version
            return await self._confirm_object(cache, get, deadline)
        wait = self._left(deadline)
        if self.listing is not None:
            wait = min(wait, self.options.confirm_after)
        try:
            await cache.wait_for(target, within=wait)
            return FRESH
        except ApiError:
            if self.listing is None or self._left(deadline) <= 0:
                raise self._behind(cache, target) from None
        self._quiet_at = cache.resource_version
        return await self._confirm(cache, start, deadline, target)

    async def _ensure_at(
        self, cache: FreshCache, get: ObjectKey | None, at_least: int, start: float, deadline: float
    ) -> Fresh:
        """A read at RV=``at_least`` the cache has not reached: its events may bring it there;
        else a listing confirms a list (if its RV is past ``at_least``); a get, once a probe
        says upstream is past ``at_least`` (an object says nothing of the revision), its
        object."""
        try:
            await cache.wait_for(
                at_least, within=min(self.options.confirm_after, self._left(deadline))
            )
            return FRESH
        except ApiError:
            pass
        self.stats.waits += 1
        if get is not None and self._object_version is not None:
            try:
                upstream = await self._within(self.probe.current(), self._left(deadline))
            except (TimeoutError, CacheProxyError):
                raise self._behind(cache, at_least) from None
            if upstream >= at_least:
                return await self._confirm_object(cache, get, deadline)
        elif self.listing is not None:
            return await self._confirm(cache, start, deadline, target=at_least)
        try:
            await cache.wait_for(at_least, within=self._left(deadline))
            return FRESH
        except ApiError:
            raise self._behind(cache, at_least) from None

    async def _confirm_object(self, cache: FreshCache, get: ObjectKey, deadline: float) -> Fresh:
        """Serve a get once the cache holds its object as upstream has it now, or newer (upstream
        has it at ``u``: nothing wrote it between ``u`` and upstream's revision, so a newer one
        in the cache is newer than that revision too), or neither has it."""
        assert self._object_version is not None
        self.stats.object_checks += 1
        asked = asyncio.ensure_future(self._object_version(get.namespace, get.name))
        upstream: int | None
        try:
            upstream = await self._within(asked, self._left(deadline))
        except TimeoutError:
            asked.cancel()
            raise self._fallback(
                "probe_timeout", "upstream did not tell the object's version"
            ) from None
        except CacheProxyError as exc:
            if isinstance(exc, ApiError) and exc.code == 404:
                upstream = None
            else:
                log.debug("%s: consistent get: upstream failed: %s", self.probe.name, exc)
                raise self._fallback(
                    "probe_failed", f"upstream could not be asked ({exc})"
                ) from None
        while True:
            mine = cache.object_version(get.key)
            if mine == upstream or (mine is not None and upstream is not None and mine > upstream):
                self.stats.confirmed += 1
                return FRESH
            try:
                await cache.wait_for(cache.resource_version + 1, within=self._left(deadline))
            except ApiError:
                raise self._fallback(
                    "cache_behind",
                    f"the cache has {get.key} at resourceVersion {mine}, upstream at {upstream}",
                ) from None

    async def _confirm(
        self, cache: FreshCache, start: float, deadline: float, target: int
    ) -> Fresh:
        """Serve once the cache is upstream's state as a listing that started after the read
        came (``start``) shows it: it holds the listing's keys and no listed object is newer
        (then it is upstream's state at the listing's RV), or it reached the listing's RV (see
        the module)."""
        assert self.listing is not None
        try:
            answer = self.listing.current(since=start)
            listing = await self._within(answer, self._left(deadline))
        except TimeoutError:
            raise self._fallback("probe_timeout", "upstream did not list the resource") from None
        except CacheProxyError as exc:
            log.debug("%s: consistent read: the listing failed: %s", self.listing.name, exc)
            raise self._fallback("probe_failed", f"upstream could not be asked ({exc})") from None
        # A listing older than the target (an RV upstream has not reached: no replica gave it)
        # confirms nothing.
        current = listing.resource_version >= target
        target = max(target, listing.resource_version)
        while True:
            rv = cache.resource_version
            if rv >= target:
                return FRESH
            if current and listing.newest <= rv and cache.holds_exactly(listing.keys):
                self._quiet_at = rv
                self.stats.confirmed += 1
                cache.confirmed(listing.resource_version, rv)
                return Fresh(confirmed_at=listing.resource_version)
            # Changes the cache has not seen yet: wait for the newest listed object, then for
            # each further move (a deletion shows only as one key fewer).
            try:
                await cache.wait_for(max(rv + 1, listing.newest), within=self._left(deadline))
            except ApiError:
                raise self._behind(cache, target) from None

    def _left(self, deadline: float) -> float:
        return max(0.0, deadline - self._clock())

    def _behind(self, cache: FreshCache, target: int) -> _NotConsistent:
        raise self._fallback(
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

    def _fallback(self, reason: str, why: str) -> _NotConsistent:
        """The read could not be made consistent (:meth:`read` answers it as configured)."""
        self.stats.fallbacks[reason] += 1
        return _NotConsistent(why)

    async def close(self) -> None:
        await self.probe.close()
        if self.listing is not None:
            await self.listing.close()
