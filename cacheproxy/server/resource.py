"""One cached resource as the server sees it: its informer's Store and EventLog, answering
list and get with the API server's resourceVersion rules, and paging from one snapshot.

- RV "0": the cache's current state, stamped with the cache's RV. RV unset: the same, once
  the cache has caught up with upstream's current RV when the resource reads consistently
  (:mod:`.consistent`; the router waits for it).
- RV=N (not older than): wait until the cache reached N (≤ ``rv_wait``), else 504
  ``ResourceVersionTooLarge`` with ``Retry-After``.
- ``resourceVersionMatch=Exact`` (or ``limit`` with RV=N): the state at exactly N, rebuilt from
  the EventLog (undoing later events) while it still holds N; else 410.
- ``limit``/``continue``: pages in key order; the token carries the snapshot RV, so every page
  comes from one snapshot; a token older than the EventLog → 410 with an "inconsistent" token
  (rv -1) to continue at the latest state; a token newer than the cache (from a replica ahead of
  this one) waits for its RV as RV=N does, so a walk may cross replicas, then is that 410.
- RVs a consistent read's listing confirmed (:attr:`ServedResource.proofs`): a list at one of
  them and its pages are cut from the state the listing confirmed.

The state at an older RV, and what a paged query selects of it, is built once per walk and kept
(:mod:`cacheproxy.server.snapshots`): a page is then O(page + log n), not a rebuild. Whether kept
or rebuilt, a page is the same, and so is every refusal.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import operator
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from cacheproxy.errors import ApiError
from cacheproxy.informer.eventlog import TooOld
from cacheproxy.informer.informer import SharedInformer
from cacheproxy.informer.store import Entry, Store
from cacheproxy.kube import status
from cacheproxy.kube.listoptions import EXACT, ListOptions
from cacheproxy.kube.partial import list_meta
from cacheproxy.kube.protobuf import object_resource_version
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.rv import decode_continue, encode_continue
from cacheproxy.kube.table import TablePrinter, printer_for
from cacheproxy.kube.versions import NEWEST, KubeVersion
from cacheproxy.server.consistent import ConsistentReads
from cacheproxy.server.query import Query, matches, select_keys
from cacheproxy.server.snapshots import KEY, Snapshot, SnapshotCache, build_snapshot

__all__ = ["ServedList", "ServedResource"]


@dataclass(slots=True)
class ServedList:
    """A list as the server answers it: one page (or every object) of one resource, at one RV."""

    rtype: ResourceType
    items: list[Entry]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None

    def body(self) -> bytes:
        """The whole body in one piece (for small or re-formatted answers)."""
        return b"".join(self.parts())

    def head(self, meta: bytes | None = None) -> bytes:
        """The list up to its first item: kind, apiVersion, ``meta`` (its own by default)."""
        if meta is None:
            meta = list_meta(
                self.resource_version, continue_token=self.continue_token, remaining=self.remaining
            )
        return b'{"kind":"%s","apiVersion":"%s","metadata":%s,"items":[' % (
            self.rtype.list_kind.encode(),
            self.rtype.api_version.encode(),
            meta,
        )

    def parts(self) -> list[bytes]:
        """The body as the bytes to write one after the other: the head, the stored bytes of
        every item with the separators between them, the tail. Nothing is copied."""
        head = self.head()
        items = self.items
        if not items:
            return [head, b"]}"]
        bodies = list(map(_BODY, items))
        if self.rtype.builtin:
            # Typed lists of built-in kinds carry items without kind/apiVersion (as the API
            # server): "{" and the body, so every separator is the same ",{".
            parts = [_ITEM_SEPARATOR] * (2 * len(bodies) + 1)
            parts[0] = head + b"{"
            parts[1::2] = bodies
        else:
            parts = [b","] * (3 * len(bodies) + 1)
            parts[0] = head
            parts[1::3] = list(map(_PREFIX, items))
            parts[2::3] = bodies
        parts[-1] = b"]}"
        return parts


_BODY = operator.attrgetter("body")
_PREFIX = operator.attrgetter("prefix")
_ITEM_SEPARATOR = b",{"


@dataclass
class ServedResource:
    """One resource the server serves, over its informer (see the module for the RV rules)."""

    rtype: ResourceType
    informer: SharedInformer
    index_paths: set[str] = field(default_factory=set)
    rv_wait: float = 3.0
    printer_source: Callable[[], TablePrinter] | None = None
    """Where this resource's Table printer comes from (custom resources: their CRD); built-in
    kinds use the API server's printer of their kind."""
    snapshots: SnapshotCache = field(default_factory=SnapshotCache)
    """The states at older RVs kept for paged lists (bounded by age and by entries)."""
    consistency: ConsistentReads | None = None
    """How lists and gets with RV unset learn upstream's RV and wait for it
    (:mod:`.consistent`); None: they are answered from the cache as it is."""
    proofs: dict[int, int] = field(default_factory=dict)
    """Upstream RVs a consistent read's listing confirmed (:mod:`.consistent`), each to the
    cache's RV whose state is upstream's there: a list at one of them (or not older than it),
    and the pages of its walk, are cut from that state. The newest :data:`PROOFS` kept."""
    keeps_managed_fields: bool = False
    """The stored objects have their ``metadata.managedFields`` (a transform that keeps them):
    a client asking to drop them gets its objects re-encoded."""
    kube_version: Callable[[], KubeVersion] = lambda: NEWEST
    """The version of the API server this resource is answered as (the server sets it: the
    upstream's, once its ``/version`` is known)."""
    last_read: float = 0.0
    """When a read was last answered from this resource (``time.monotonic``; 0: never)."""
    _progress: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        # Wake readers waiting for an RV whenever the store moves.
        self.informer.add_listener(lambda _event: self._progress.set())
        self.informer.add_bookmark_listener(lambda _rv: self._progress.set())
        self.informer.add_relist_listener(self._relisted)

    def _relisted(self, _rv: int) -> None:
        # The EventLog restarted: no older state can be rebuilt, so none may be served.
        self.snapshots.clear()
        self.proofs.clear()
        self._progress.set()

    def table_printer(self) -> TablePrinter:
        """The printer of this resource's Tables, as the upstream's version prints them."""
        if self.printer_source is not None:
            return self.printer_source()
        return printer_for(self.rtype.group, self.rtype.resource, self.kube_version())

    @property
    def store(self) -> Store:
        return self.informer.store

    @property
    def synced(self) -> bool:
        return self.informer.has_synced

    @property
    def resource_version(self) -> int:
        return int(self.informer.store.resource_version)

    def holds_exactly(self, keys: Collection[str]) -> bool:
        """Whether the cache's keys are ``keys`` (a consistent read's confirmation)."""
        store = self.informer.store
        return len(store) == len(keys) and all(key in store for key in keys)

    def confirmed(self, upstream_rv: int, cache_rv: int) -> None:
        """A listing at ``upstream_rv`` showed the cache's state at ``cache_rv`` is upstream's
        there (nothing changed in between but what a later event undoes)."""
        if upstream_rv > cache_rv:
            self.proofs[upstream_rv] = cache_rv
            while len(self.proofs) > PROOFS:
                del self.proofs[next(iter(self.proofs))]

    def proven(self, rv: int, *, exact: bool) -> tuple[int, int] | None:
        """(a confirmed upstream RV, the cache's RV with its state) for ``rv`` — exactly
        ``rv``, or the oldest one not older — or None."""
        if exact:
            return (rv, self.proofs[rv]) if rv in self.proofs else None
        newer = [upstream for upstream in self.proofs if upstream >= rv]
        return (min(newer), self.proofs[min(newer)]) if newer else None

    def reached(self, rv: int) -> bool:
        """Whether a read not older than ``rv`` can be served without waiting."""
        return rv <= self.resource_version or self.proven(rv, exact=False) is not None

    def key_of(self, namespace: str | None, name: str) -> str:
        """The cache's key of object ``name`` (in ``namespace`` if the resource is namespaced)."""
        return f"{namespace}/{name}" if namespace and self.rtype.namespaced else name

    def object_version(self, key: str) -> int | None:
        """The resourceVersion of the object at ``key`` in the cache (None: none)."""
        entry = self.informer.store.get(key)
        return None if entry is None else entry.rv

    def wrote(self, answer: bytes) -> None:
        """A write to this resource passed through the daemon and upstream answered it with
        ``answer`` (the object, JSON or protobuf): consistent reads that follow wait for its
        resourceVersion (:meth:`.ConsistentReads.wrote`)."""
        if self.consistency is None:
            return
        rv = _answer_rv(answer)
        if rv > 0:
            self.consistency.wrote(rv)

    # ------------------------------------------------------------------ RVs

    async def wait_for(self, rv: int, *, within: float | None = None) -> None:
        """Until the cache reached ``rv`` (≤ ``within``, by default ``rv_wait`` s), else 504 too
        large RV."""
        if self.resource_version >= rv:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.rv_wait if within is None else within)
        while self.resource_version < rv:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise status.too_large_resource_version(rv, self.resource_version)
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), remaining)
            except TimeoutError:
                continue

    def snapshot(self, rv: int, query: Query, *, keep: bool = False) -> Snapshot:
        """What ``query`` selects of the state at ``rv``: the current entries with later events
        undone (TooOld if the EventLog no longer reaches back to ``rv``). Kept for the next pages
        when ``keep`` and ``rv`` is older than the cache (a newer RV's state would change)."""
        store = self.informer.store
        log = self.informer.event_log
        rtype = self.rtype

        def select(whole: Snapshot) -> Snapshot:
            part = whole.in_namespace(query.namespace) if query.namespace else whole
            if query.selective:
                part = part.filtered(lambda e: matches(e, query, rtype, store))
            return part

        everything = not query.namespace and not query.selective
        return self.snapshots.view(
            rv,
            None if everything else query,
            oldest=log.oldest_resumable,
            build=lambda: build_snapshot(store, log, rv),
            select=select,
            keep=keep and rv < self.resource_version,
        )

    # ------------------------------------------------------------------ reads

    def get(self, namespace: str | None, name: str) -> Entry:
        key = self.key_of(namespace, name)
        entry = self.informer.store.get(key)
        if entry is None:
            raise status.not_found(resource=self.rtype.resource, name=name, group=self.rtype.group)
        return entry

    def namespaces(self) -> list[str]:
        """The namespaces that hold objects now, in order: one jump through the sorted keys
        per namespace (``ns/`` sorts below ``ns0``, so ``ns + "0"`` skips ``ns``'s keys)."""
        found: list[str] = []
        start = ""
        store = self.informer.store
        while (key := next(iter(store.sorted_keys(start=start)), None)) is not None:
            namespace = key.partition("/")[0]
            found.append(namespace)
            start = namespace + "0"
        return found

    def current_keys(self, query: Query) -> list[str]:
        """Keys of the current state matching ``query``, in key order."""
        store = self.informer.store
        candidates, exact = select_keys(store, query, self.index_paths)
        if candidates is None:
            keys = list(store.sorted_keys(namespace=query.namespace))
            if not query.selective:
                return keys
        else:
            keys = candidates
            if exact:
                return keys
        get = store.get
        out = []
        for key in keys:
            entry = get(key)
            if entry is not None and matches(entry, query, self.rtype, store):
                out.append(key)
        return out

    async def list(
        self, query: Query, opts: ListOptions, *, confirmed_at: int | None = None
    ) -> ServedList:
        """One page of ``query`` as ``opts`` say (see the module). ``confirmed_at``: a
        consistent read's listing confirmed the cache there (:meth:`confirmed`): the list
        carries that RV."""
        rv, older = await self._list_source(query, opts, confirmed_at)
        if older is not None:
            entries = older.entries
            start, end = _bounds(entries, query, opts, key=KEY)
            last = entries[end - 1].key if end else ""
            return _page(
                self.rtype,
                query,
                rv,
                entries[start:end],
                end=end,
                total=len(entries),
                last=last,
                root=self._key_root(opts),
            )
        if not query.selective and opts.limit:
            return self._page_of_all(query, opts, rv)
        keys = self.current_keys(query)
        start, end = _bounds(keys, query, opts)
        items = self.informer.store.get_many(keys[start:end])
        last = keys[end - 1] if end else ""
        return _page(
            self.rtype,
            query,
            rv,
            items,
            end=end,
            total=len(keys),
            last=last,
            root=self._key_root(opts),
        )

    def _key_root(self, opts: ListOptions) -> str:
        """What the start key of a page's continue token begins with, as the upstream's version
        writes it (1.32 roots the first page's, not the pages after it)."""
        first = not opts.continue_token
        rooted = self.kube_version().roots_first_page_keys(self.rtype.qualified)
        return "/" if first and rooted else ""

    def _page_of_all(self, query: Query, opts: ListOptions, rv: int) -> ServedList:
        """One page of an unselected list of the current state: a range of the store's sorted
        keys, O(page + log n) rather than O(n) per page."""
        store = self.informer.store
        prefix = f"{query.namespace}/" if query.namespace else ""
        start = prefix + decode_continue(opts.continue_token).key if opts.continue_token else ""
        keys = list(
            itertools.islice(
                store.sorted_keys(namespace=query.namespace, start=start), opts.limit + 1
            )
        )
        page = ServedList(self.rtype, store.get_many(keys[: opts.limit]), rv)
        if len(keys) > opts.limit:
            last = keys[opts.limit - 1]
            start_key = self._key_root(opts) + last.removeprefix(prefix) + "\x00"
            page.continue_token = encode_continue(rv, start_key)
            page.remaining = store.count_keys(namespace=query.namespace, start=last + "\x00")
        return page

    async def _list_source(
        self, query: Query, opts: ListOptions, confirmed_at: int | None = None
    ) -> tuple[int, Snapshot | None]:
        """(list RV, what ``query`` selects of the snapshot at that RV, or None for the current
        state)."""
        if opts.continue_token:
            # First, as the API server (etcd3 store), in its version's words.
            token = decode_continue(opts.continue_token, kube=self.kube_version())
            if opts.resource_version not in ("", "0"):
                raise status.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            proof = self.proven(token.resource_version, exact=True)
            if proof is not None and (source := self._proven_source(proof, query, opts)):
                return source
            if token.resource_version > self.resource_version:
                # A token from a replica ahead of this one: its state is not here yet, and the
                # state here is older (cut from it, the page would miss the later writes). Wait
                # for it as for RV=N, then answer what the API server answers a token it cannot
                # continue: 410 with an inconsistent token. Waiting is no use when a listing
                # confirmed the cache where it still is (nothing is on its way).
                await self._continue_at(token.resource_version, token.key)
            if token.resource_version == -1 or token.resource_version == self.resource_version:
                return self.resource_version, None
            try:
                snapshot = self.snapshot(token.resource_version, query, keep=opts.limit > 0)
            except TooOld:
                raise status.expired(
                    status.CONTINUE_EXPIRED_MESSAGE,
                    continue_token=encode_continue(-1, token.key),
                ) from None
            return token.resource_version, snapshot
        requested = opts.rv
        exact = opts.resource_version_match == EXACT or (
            opts.limit > 0 and requested > 0 and not opts.resource_version_match
        )
        wanted = requested or confirmed_at or 0
        if wanted > self.resource_version:
            proof = self.proven(wanted, exact=exact or not requested)
            if proof is not None and (source := self._proven_source(proof, query, opts)):
                return source
            if requested > 0:
                await self.wait_for(requested)
        if exact and requested != self.resource_version:
            try:
                return requested, self.snapshot(requested, query, keep=opts.limit > 0)
            except TooOld:
                raise status.expired(
                    "The resourceVersion for the provided list is too old."
                ) from None
        return self.resource_version, None

    async def _continue_at(self, rv: int, start_key: str) -> None:
        quiet = self.resource_version in self.proofs.values()
        try:
            await self.wait_for(rv, within=0.0 if quiet else None)
        except ApiError:
            raise status.expired(
                status.CONTINUE_EXPIRED_MESSAGE, continue_token=encode_continue(-1, start_key)
            ) from None

    def _proven_source(
        self, proof: tuple[int, int], query: Query, opts: ListOptions
    ) -> tuple[int, Snapshot | None] | None:
        """(the confirmed RV, the state it was confirmed for), or None when the EventLog no
        longer reaches that state."""
        upstream, cache = proof
        if cache == self.resource_version:
            return upstream, None
        try:
            return upstream, self.snapshot(cache, query, keep=opts.limit > 0)
        except TooOld:
            return None


PROOFS: Final = 64
"""Confirmed RVs kept per resource (:attr:`ServedResource.proofs`)."""


def _bounds(
    keys: Sequence[Any], query: Query, opts: ListOptions, *, key: Callable[[Any], str] | None = None
) -> tuple[int, int]:
    """The page's slice of ``keys`` (in key order; ``key`` gives an item's key): from the
    continue token's start key, at most ``limit`` long."""
    start = 0
    if opts.continue_token:
        prefix = f"{query.namespace}/" if query.namespace else ""
        start = bisect.bisect_left(keys, prefix + decode_continue(opts.continue_token).key, key=key)
    end = len(keys) if not opts.limit else min(len(keys), start + opts.limit)
    return start, end


def _page(
    rtype: ResourceType,
    query: Query,
    rv: int,
    items: list[Entry],
    *,
    end: int,
    total: int,
    last: str,
    root: str = "",
) -> ServedList:
    """A page that ends before position ``end`` of the ``total`` objects selected, at key
    ``last``: with a continue token when more follow (and their count, without selectors)."""
    page = ServedList(rtype, items, rv)
    if end < total:
        prefix = f"{query.namespace}/" if query.namespace else ""
        page.continue_token = encode_continue(rv, root + last.removeprefix(prefix) + "\x00")
        if not query.selective:
            page.remaining = total - end
    return page


def _answer_rv(answer: bytes) -> int:
    """The resourceVersion of a write's answer (0 when it has none: a Status, or a body that
    is neither a JSON nor a protobuf object)."""
    text = object_resource_version(answer)
    if text is None:
        try:
            doc = orjson.loads(answer)
        except orjson.JSONDecodeError:
            return 0
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        text = meta.get("resourceVersion") if isinstance(meta, dict) else None
    try:
        return int(text) if isinstance(text, str) else 0
    except ValueError:
        return 0
