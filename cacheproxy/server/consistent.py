"""What a "Most Recent" read (``resourceVersion`` unset) may ask upstream, when the read
planner (:mod:`.readplan`) says the cache must prove itself fresh: the resource is in ``strict``
mode, or its upstream watch is down.

The API server answers such reads from its watch cache (KEP-2340, ``WaitUntilFreshAndList``):
it asks etcd for its current revision, waits until the cache has reached it, then serves from
memory. cacheproxy can do the same one hop further out:

1. **probe**: upstream's current resourceVersion for the resource, by the cheapest request that
   gives it (the daemon wires a ``limit=1`` list at RV unset of the cached collection: its list
   RV is etcd's current revision);
2. **wait** until the resource's cache RV reached it (its events or bookmarks move it);
3. **serve** from the cache as it is then.

Probes are shared (:class:`SharedProbe`): the reads of one resource that arrive while no probe
has started join one round; a read that arrives while a probe is in flight waits for the *next*
round, since the in-flight probe may have been answered before the read's write (the API server
batches its progress requests the same way). So upstream sees at most one probe per resource at
a time, and at most ``probes_per_second``, however many clients read. Idle: none.

A resource nobody writes never gets there by its own events: upstream's RV moves with every write
to any resource (on a real cluster, leases every few seconds), its cache's only with its own events
and bookmarks. Such a read is forwarded upstream when it can be (the planner's choice: upstream
answers it for what the read itself costs). When it cannot be (pass-through off, or a caller
without credentials to forward), it is **confirmed**: one list of the collection's metadata at RV
unset (:data:`ListKeys`, shared by the reads waiting), and the cache serves if it holds exactly
that list's keys and no listed object is newer than the cache. That proves the cache *is*
upstream's state: every object still there was last written at or before the cache's RV, so the
cache holds it as it is now, and the keys are the same, so nothing was added or deleted since (a
write between the two leaves a newer object or one fewer key). A get is confirmed by its object's
resourceVersion (one small request).

Writes that passed through the daemon return their object's RV (:meth:`ConsistentReads.wrote`):
in ``live`` mode the reads that follow wait for the cache to hold it (read-your-writes, no
upstream request).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeVar

from cacheproxy.errors import ApiError, CacheProxyError
from cacheproxy.kube.keys import KeyDigest
from cacheproxy.server.probing import WAIT_BUCKETS, ConsistencyStats, SharedProbe, count_listing
from cacheproxy.server.readplan import ReadMode

__all__ = [
    "SERVE_FROM_CACHE",
    "WAIT_BUCKETS",
    "ConsistencyOptions",
    "ConsistencyStats",
    "ConsistentReads",
    "KeyListing",
    "ListKeys",
    "ObjectKey",
    "ObjectVersion",
    "OnTimeout",
    "ProbeRV",
    "SharedProbe",
    "Unproven",
    "warning_header",
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
    def digest(self) -> KeyDigest:
        """The digest of every object's store key (``namespace/name``, or ``name`` when
        cluster-scoped)."""
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


@dataclass(frozen=True, slots=True)
class ConsistencyOptions:
    mode: ReadMode = "live"
    """What a read with ``resourceVersion`` unset is answered from (:mod:`.readplan`)."""
    probes_per_second: int = 100
    """At most this many probes of one resource per second, one at a time: a read that comes
    while none is in flight starts one at once, the reads that come while one is share the
    next, which starts when it returned (and ``1/probes_per_second`` after it started)."""
    timeout: float = 3.0
    """A consistent read waits this long for the probe and the cache (the watch cache's 3 s)."""
    on_timeout: OnTimeout = SERVE_FROM_CACHE
    """``cache``: serve the cache as it is with a ``Warning``; ``error``: 504."""
    confirm_after: float = 0.005
    """How long a read waits for the cache's events to bring it to an RV (upstream's probed
    one, a write's, another replica's) before it is forwarded or confirmed: events normally
    arrive within milliseconds of the write; past this a quiet resource is more likely than an
    event in flight (the watch's delivery lag: p99 a few milliseconds on kube-apiserver 1.28 and
    1.32)."""
    after_write: float = 1.0
    """For this long after a write through the daemon (:meth:`wrote`), ``live`` reads wait for
    the cache to hold that write (its event comes within milliseconds): read-your-writes at no
    upstream cost. A write the collection never sees (outside its namespace or selectors) holds
    them up for the rest of the window. 0: never."""


class FreshCache(Protocol):
    """What a consistent read waits on: a cache with an RV that can be awaited, and whose keys
    can be compared with a listing's."""

    @property
    def resource_version(self) -> int: ...

    async def wait_for(self, rv: int, *, within: float | None = None) -> None: ...

    def holds(self, digest: KeyDigest) -> bool:
        """Whether the cache's keys are those of ``digest``, no more, no fewer."""
        ...

    def object_version(self, key: str) -> int | None:
        """The resourceVersion of the object the cache holds at ``key`` (None: none)."""
        ...


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """The object a get reads: its namespace (None: cluster-scoped) and name, and its key in
    the cache."""

    namespace: str | None
    name: str
    key: str


class Unproven(Exception):
    """Upstream could not be asked, or the cache did not catch up in time: why, and the
    fallback's metric label."""

    def __init__(self, label: str, why: str) -> None:
        super().__init__(why)
        self.label = label
        self.why = why


class ConsistentReads:
    """What one resource's "Most Recent" reads may ask upstream (see the module), for
    :func:`.readexec.decide` to carry out the read planner's steps
    (:mod:`.readplan`): upstream's current RV by a shared probe, a listing of the collection
    (shared too), a get's object version; and the newest write through the daemon."""

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
        self.clock = clock
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

    @property
    def name(self) -> str:
        return self.probe.name

    def wrote(self, rv: int) -> None:
        """A write to the resource passed through the daemon and upstream answered it at
        ``rv``: the reads that follow wait for the cache to hold it (see ``after_write``)."""
        if rv > self._written or self.clock() - self._written_at > self.options.after_write:
            self._written = rv
        self._written_at = self.clock()

    def written(self) -> int:
        """The write the reads wait for now (0: none, or its ``after_write`` window is over)."""
        if self.clock() - self._written_at > self.options.after_write:
            return 0
        return self._written

    def write_window(self) -> float:
        """Seconds left of the last write's ``after_write`` window (0: over)."""
        return max(0.0, self._written_at + self.options.after_write - self.clock())

    def can_confirm(self, *, get: bool) -> bool:
        """Whether a read (a ``get`` or not) can be confirmed by upstream."""
        return (self._object_version if get else self.listing) is not None

    async def probed(self, deadline: float) -> int:
        """Upstream's current RV, from a probe that started after now (raises Unproven)."""
        try:
            return await self._within(self.probe.current(), self._left(deadline))
        except TimeoutError:
            raise Unproven("probe_timeout", "upstream did not tell its resourceVersion") from None
        except CacheProxyError as exc:
            log.debug("%s: consistent read: the probe failed: %s", self.probe.name, exc)
            raise Unproven("probe_failed", f"upstream could not be asked ({exc})") from None

    async def confirm_object(self, cache: FreshCache, get: ObjectKey, deadline: float) -> None:
        """Return once the cache holds a get's object as upstream has it now, or newer (upstream
        has it at ``u``: nothing wrote it between ``u`` and upstream's revision, so a newer one
        in the cache is newer than that revision too), or neither has it; raise Unproven when
        it does not in time."""
        assert self._object_version is not None
        self.stats.object_checks += 1
        asked = asyncio.ensure_future(self._object_version(get.namespace, get.name))
        upstream: int | None
        try:
            upstream = await self._within(asked, self._left(deadline))
        except TimeoutError:
            asked.cancel()
            raise Unproven("probe_timeout", "upstream did not tell the object's version") from None
        except CacheProxyError as exc:
            if isinstance(exc, ApiError) and exc.code == 404:
                upstream = None
            else:
                log.debug("%s: consistent get: upstream failed: %s", self.probe.name, exc)
                raise Unproven("probe_failed", f"upstream could not be asked ({exc})") from None
        while True:
            mine = cache.object_version(get.key)
            if mine == upstream or (mine is not None and upstream is not None and mine > upstream):
                self.stats.confirmed += 1
                return
            try:
                await cache.wait_for(cache.resource_version + 1, within=self._left(deadline))
            except ApiError:
                raise Unproven(
                    "cache_behind",
                    f"the cache has {get.key} at resourceVersion {mine}, upstream at {upstream}",
                ) from None

    async def confirm_list(
        self, cache: FreshCache, *, since: float, deadline: float, target: int
    ) -> None:
        """Return once the cache is upstream's state as a listing that started after the read
        came (``since``) shows it: it holds the listing's keys and no listed object is newer
        (then it is upstream's state at the listing's RV), or it reached the listing's RV (see
        the module); raise Unproven when it does not in time."""
        assert self.listing is not None
        try:
            answer = self.listing.current(since=since)
            listing = await self._within(answer, self._left(deadline))
        except TimeoutError:
            raise Unproven("probe_timeout", "upstream did not list the resource") from None
        except CacheProxyError as exc:
            log.debug("%s: consistent read: the listing failed: %s", self.listing.name, exc)
            raise Unproven("probe_failed", f"upstream could not be asked ({exc})") from None
        # A listing older than the target (an RV upstream has not reached) confirms nothing.
        current = listing.resource_version >= target
        target = max(target, listing.resource_version)
        while True:
            rv = cache.resource_version
            if rv >= target:
                return
            if current and listing.newest <= rv and cache.holds(listing.digest):
                self.stats.confirmed += 1
                return
            # Changes the cache has not seen yet: wait for the newest listed object, then for
            # each further move (a deletion shows only as one key fewer).
            try:
                await cache.wait_for(max(rv + 1, listing.newest), within=self._left(deadline))
            except ApiError:
                raise Unproven(
                    "cache_behind",
                    f"the cache is at resourceVersion {cache.resource_version}, upstream at "
                    f"{target}",
                ) from None

    def _left(self, deadline: float) -> float:
        return max(0.0, deadline - self.clock())

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

    async def close(self) -> None:
        await self.probe.close()
        if self.listing is not None:
            await self.listing.close()


def warning_header(why: str) -> bytes:
    """The ``Warning`` of a read with RV unset served from the cache as it is, its freshness
    not proven (``why``). RFC 7234 warn-code 299 ("miscellaneous persistent warning"), as the
    API server writes its warnings; clients (kubectl, client-go) show or log them."""
    return f'299 - "not a consistent read: {why}; served from the cache as it is"'.encode()
