"""The simulator's API verbs over :class:`~cacheproxy.sim.storage.SimStore`, free of HTTP: the reads
here, the writes in :mod:`~cacheproxy.sim.writes`.

list / get / watch keep the API server's resourceVersion rules (API concepts, "Resource
versions"): unset → latest; "0" → any (we answer latest); N → not older than N, waiting up to
``rv_wait`` seconds and then 504 ``ResourceVersionTooLarge``; ``limit`` + RV=N or
``resourceVersionMatch=Exact`` → the exact snapshot at N, 410 once compacted. Pages are cut in key
order from one snapshot and continue tokens carry it.

Who answers a read is the API server's split between its watch caches and etcd. By default every
cache is at the global RV. With ``per_resource_cache`` (:class:`~cacheproxy.sim.simconfig.SimConfig`)
each resource's cache is at the RV of its own last write or progress notification, and the reads
the 1.28 cacher hands to etcd (RV unset, exact RVs, ``limit`` with an RV other than 0) are at the
global RV, with etcd's answers to RVs it has not reached (a 500 for an exact one, an immediate 504
otherwise). Resources without a watch cache (``uncached_resources``) are always etcd's.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson

from cacheproxy.kube import status
from cacheproxy.kube.listoptions import EXACT, ListOptions
from cacheproxy.kube.partial import list_meta, partial_list_head, partial_object_metadata
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.rv import decode_continue, encode_continue, parse_resource_version
from cacheproxy.kube.versions import NEWEST, KubeVersion
from cacheproxy.sim import statuses
from cacheproxy.sim.simconfig import SimConfig
from cacheproxy.sim.storage import Event, SimStore, StoredObject, iter_snapshot
from cacheproxy.sim.watch import SimWatcher, SimWatchPlan
from cacheproxy.sim.writes import Writes

__all__ = ["ListResult", "SimApi"]


@dataclass(frozen=True, slots=True)
class ListResult:
    rtype: ResourceType
    items: list[StoredObject]
    resource_version: int
    continue_token: str
    remaining: int | None

    def _list_meta(self) -> bytes:
        return list_meta(
            self.resource_version,
            continue_token=self.continue_token,
            remaining=self.remaining,
        )

    def encode(self) -> bytes:
        head = b'{"kind":"%s","apiVersion":"%s","metadata":%s,"items":[' % (
            self.rtype.list_kind.encode(),
            self.rtype.api_version.encode(),
            self._list_meta(),
        )
        return head + b",".join(o.list_item for o in self.items) + b"]}"

    def encode_metadata(self, api_version: str) -> bytes:
        """As the ``PartialObjectMetadataList`` metadata-only clients ask for on ``Accept``."""
        head = partial_list_head(api_version, self._list_meta())
        items = (orjson.dumps(partial_object_metadata(o.obj, api_version)) for o in self.items)
        return head + b",".join(items) + b"]}"


class SimApi(Writes):
    """list/get/watch with the API server's semantics; the writes are :class:`Writes`'."""

    def __init__(
        self,
        store: SimStore,
        config: SimConfig | None = None,
        *,
        default_watch_timeout: Callable[[], float] = lambda: random.uniform(1800, 3600),
    ) -> None:
        self.store = store
        self.config = config or SimConfig()
        self.kube = KubeVersion.parse(self.config.git_version) or NEWEST
        """The kube-apiserver version answered as."""
        self.default_watch_timeout = default_watch_timeout

    # ------------------------------------------------------------------ the watch caches

    def cached(self, rtype: ResourceType) -> bool:
        """Whether ``rtype`` has a watch cache (else etcd serves its reads and watches)."""
        return rtype.qualified not in self.config.uncached_resources

    def cache_rv(self, rtype: ResourceType) -> int:
        """The RV ``rtype``'s reads from the cache are at: its own cache's, or the global one."""
        if self.config.per_resource_cache and self.cached(rtype):
            return self.store.cache_rv(rtype)
        return self.store.rv

    async def wait_for_rv(self, rv: int, rtype: ResourceType | None = None) -> None:
        """Wait until the cache of ``rtype`` (default: the store) reached ``rv`` (≤ ``rv_wait``
        s), else 504 too large RV; at once when etcd serves ``rtype``."""

        store = self.store
        asks = rtype is not None and self._asks_for_progress(rtype)

        def current() -> int:
            if asks and rtype is not None and store.cache_rv(rtype) < rv <= store.rv:
                store.progress_notify(rtype)  # the cache asks etcd, which has reached it
            return self.cache_rv(rtype) if rtype is not None else store.rv

        if current() >= rv:
            return
        if rtype is not None and not self.cached(rtype):
            raise statuses.too_large_resource_version_now(rv, store.rv)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.rv_wait
        while current() < rv:
            if loop.time() >= deadline:
                raise status.too_large_resource_version(rv, current())
            await asyncio.sleep(0.02)

    def _asks_for_progress(self, rtype: ResourceType) -> bool:
        """Whether ``rtype``'s cache asks etcd for progress when a read waits for it
        (``ConsistentListFromCache``), rather than waiting for writes and notifications."""
        config = self.config
        return (
            config.per_resource_cache and config.consistent_list_from_cache and self.cached(rtype)
        )

    def _snapshot_cached(self, rtype: ResourceType, rv: int) -> bool:
        """Whether ``rtype``'s watch cache serves an exact read at ``rv`` from its snapshots
        (``ListFromCacheSnapshot``): an RV in its history, or one not yet reached (which it
        waits for)."""
        return (
            self.config.list_from_cache_snapshot
            and self.config.per_resource_cache
            and self.cached(rtype)
            and rv >= self.store.cache_horizon(rtype)
        )

    def _from_cache(self, rtype: ResourceType, opts: ListOptions) -> bool:
        """Whether the cacher serves a list itself (``shouldDelegateList``): not an exact RV,
        ``limit`` with an RV other than 0, a resource it does not cache, nor (1.28, without
        ``ConsistentListFromCache``) an RV unset."""
        return (
            self.cached(rtype)
            and (opts.resource_version != "" or self.config.consistent_list_from_cache)
            and not (opts.limit > 0 and opts.resource_version != "0")
            and opts.resource_version_match != EXACT
        )

    # ------------------------------------------------------------------ reads

    async def get(self, rtype: ResourceType, namespace: str | None, name: str, rv: str) -> bytes:
        if rv not in ("", "0"):
            await self.wait_for_rv(parse_resource_version(rv), rtype)
        return self.store.get_stored(rtype, namespace, name).full

    async def list(
        self, rtype: ResourceType, namespace: str | None, opts: ListOptions
    ) -> ListResult:
        store = self.store
        start = ""
        limit = opts.limit
        from_storage = False
        # Token keys are relative to the listed collection, as etcd3's ``encodeContinue`` strips
        # the key prefix: "ns-1/name\x00" across namespaces, "name\x00" within ns-1.
        prefix = f"{namespace}/" if namespace else ""
        requested = opts.rv
        exact = opts.resource_version_match == EXACT or (
            opts.limit > 0 and requested > 0 and not opts.resource_version_match
        )
        if opts.continue_token:
            token = decode_continue(opts.continue_token, kube=self.kube)
            if opts.resource_version not in ("", "0"):
                raise status.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            start = prefix + token.key
            from_storage = not self._snapshot_cached(rtype, token.resource_version)
            if token.resource_version == -1:
                rv, source = store.rv, None
            elif not from_storage:
                rv = token.resource_version
                source = store.snapshot(rtype, rv, cached=True)
            else:
                rv = token.resource_version
                if rv < store.compacted_rv:
                    raise status.expired(
                        status.CONTINUE_EXPIRED_MESSAGE,
                        continue_token=encode_continue(-1, token.key),
                    )
                source = None if rv == store.rv else store.snapshot(rtype, rv)
        elif self.cached(rtype) and not self.config.per_resource_cache:
            # One RV for every cache: every read waits for it, and serves its snapshot.
            if requested > 0:
                await self.wait_for_rv(requested)
            if exact and requested != store.rv:
                rv, source = requested, store.snapshot(rtype, requested)
            else:
                rv, source = store.rv, None
            if opts.resource_version == "0" and self.config.rv0_list_ignores_limit:
                limit = 0
        elif exact and self._snapshot_cached(rtype, requested):
            # ListFromCacheSnapshot: the cache's snapshot of that RV, compacted in etcd or not.
            await self.wait_for_rv(requested, rtype)
            rv, source = requested, store.snapshot(rtype, requested, cached=True)
        elif self._from_cache(rtype, opts):
            # The resource's own cache: its state is the latest of its objects, at its RV.
            if opts.resource_version == "":
                store.progress_notify(rtype)  # a consistent read: caught up with etcd first
            if requested > 0:
                await self.wait_for_rv(requested, rtype)
            rv, source = store.cache_rv(rtype), None
            if opts.resource_version == "0" and self.config.rv0_list_ignores_limit:
                limit = 0
        elif exact:
            if requested > store.rv:
                raise statuses.future_revision()
            rv = requested
            source = None if requested == store.rv else store.snapshot(rtype, requested)
        else:
            # etcd, not older than the RV asked for (RV unset: the latest).
            if requested > store.rv:
                raise statuses.too_large_resource_version_now(requested, store.rv)
            rv, source = store.rv, None
        objects = (
            store.iter_range(rtype, namespace, start=start)
            if source is None
            else iter_snapshot(source, namespace, start=start)
        )
        # 1.32 roots the start key of a cached resource's first page's token (only).
        # 1.32 roots the start key of a cached resource's first page's token; 1.36 also of the
        # pages after it that its cache's snapshots serve.
        continued = bool(opts.continue_token)
        rooted = self.cached(rtype) and self.kube.roots_page_keys(
            rtype.qualified, continued=continued
        )
        root = "/" if rooted and not (continued and from_storage) else ""
        return _page(rtype, objects, opts, rv, limit=limit, key_prefix=prefix, root=root)

    def watch_options(self, rtype: ResourceType, opts: ListOptions) -> ListOptions:
        """A watch's options as the API server takes them (before its response starts): with
        ``WatchList`` on, a watch from RV "" or "0" with bookmarks and no ``sendInitialEvents`` is
        a watch-list; a watch-list of a resource without a watch cache is a 422 unless etcd serves
        it (``watch_list_from_storage``)."""
        if self.config.watch_list and opts.allow_watch_bookmarks:
            # Without bookmarks a defaulted watch-list sends what a plain watch sends.
            opts = opts.as_watch_list()
        if (
            opts.send_initial_events is not None
            and not self.cached(rtype)
            and not self.config.watch_list_from_storage
        ):
            raise statuses.unsupported_by_etcd(rtype.resource)
        return opts

    async def wait_for_watch(self, rtype: ResourceType, opts: ListOptions) -> None:
        """Before a watch starts: a watch from an RV the cache has not reached waits for it (and
        504s) when ``future_watch_waits``, and a watch-list always does."""
        if opts.rv > self.cache_rv(rtype) and (
            self.config.future_watch_waits or opts.send_initial_events
        ):
            await self.wait_for_rv(opts.rv, rtype)

    def open_watch(
        self, rtype: ResourceType, namespace: str | None, opts: ListOptions
    ) -> tuple[SimWatcher, SimWatchPlan]:
        """Register a watcher and plan what it sends first. Synchronous: nothing can be written
        between computing the initial state and registering, so no event is lost or doubled.
        A too-old RV raises 410 (the caller sends it as an in-stream ERROR event)."""
        store, config = self.store, self.config
        cached = self.cached(rtype)
        per_resource = config.per_resource_cache and cached
        requested = opts.rv
        initial: list[StoredObject] = []
        replay: list[Event] = []
        end_after: int | None = None
        if opts.send_initial_events and per_resource and not config.late_initial_events_end:
            # Current servers make the cache fresh first (a progress request to etcd).
            store.progress_notify(rtype)
        cache_rv = self.cache_rv(rtype)
        start_rv = requested
        if opts.send_initial_events or (
            opts.send_initial_events is None and opts.resource_version in ("", "0")
        ):
            initial = list(store.iter_range(rtype, namespace))
            start_rv = cache_rv
            if opts.send_initial_events and opts.allow_watch_bookmarks:
                # The RV the end bookmark waits for (getCommonResourceVersionLockedFunc).
                end_after = store.rv if opts.resource_version == "" else max(requested, cache_rv)
        elif opts.resource_version in ("", "0"):
            start_rv = cache_rv
        elif requested < store.rv:
            replay = store.events_since(rtype, requested, from_storage=not cached)
        watcher = SimWatcher(
            rtype=rtype,
            namespace=namespace,
            labels=opts.label_selector,
            fields=opts.field_selector,
            buffer=config.watch_buffer,
            start_rv=start_rv,
            kube=self.kube,
        )
        initial = [o for o in initial if watcher.visible(o)]
        store.add_watcher(watcher)
        timeout = (
            float(opts.timeout_seconds) if opts.timeout_seconds else self.default_watch_timeout()
        )
        plan = SimWatchPlan(
            initial=initial,
            replay=replay,
            end_bookmark_after=end_after,
            # etcd's own watches send no bookmarks.
            allow_bookmarks=opts.allow_watch_bookmarks and cached,
            timeout=timeout,
            bookmark_interval=config.bookmark_interval,
            only_newer_bookmarks=per_resource,
        )
        return watcher, plan


def _page(
    rtype: ResourceType,
    objects: Iterator[StoredObject],
    opts: ListOptions,
    rv: int,
    *,
    limit: int,
    key_prefix: str = "",
    root: str = "",
) -> ListResult:
    labels, fields = opts.label_selector, opts.field_selector
    filtered = labels.empty and fields.empty
    items: list[StoredObject] = []
    token = ""
    remaining: int | None = None
    for stored in objects:
        if not (filtered or stored.matches(labels, fields)):
            continue
        if limit and len(items) == limit:
            token = encode_continue(rv, root + items[-1].key.removeprefix(key_prefix) + "\x00")
            if filtered:
                remaining = 1 + sum(1 for _ in objects)
            break
        items.append(stored)
    return ListResult(
        rtype=rtype, items=items, resource_version=rv, continue_token=token, remaining=remaining
    )
