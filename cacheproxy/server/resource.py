"""One cached resource as the server sees it: its informer's Store and EventLog, answering
list and get at the state the read planner chose, and paging from one snapshot.

The read planner (:mod:`.readplan`, carried out by :func:`.readexec.decide`) is given the
resource's state (:meth:`ServedResource.state`) and says what to answer from — the current
state, the state at an older RV, or upstream (forward) — or refuses
(:meth:`ServedResource.refusal` words it). :meth:`ServedResource.list` and
:meth:`ServedResource.get` then cut the answer from that state:

- the current state, stamped with the cache's RV;
- an older RV's state (``Exact``, a ``limit`` with RV=N, a continue token's), rebuilt from the
  EventLog (undoing later events) and kept for the walk's next pages
  (:mod:`cacheproxy.server.snapshots`): a page is then O(page + log n), not a rebuild;
- ``limit``/``continue``: pages in key order; the token carries the snapshot RV, so every page
  comes from one snapshot.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import heapq
import itertools
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from cacheproxy.errors import ApiError
from cacheproxy.informer.eventlog import TooOld
from cacheproxy.informer.events import Changed, InformerEvent, Relisted
from cacheproxy.informer.informer import SharedInformer
from cacheproxy.informer.packing import JOINER
from cacheproxy.informer.store import Entry, Store, Unpackers
from cacheproxy.informer.store import bodies as stored_bodies
from cacheproxy.kube import status
from cacheproxy.kube.keys import KeyDigest, key_digest
from cacheproxy.kube.listoptions import ListOptions
from cacheproxy.kube.partial import list_meta
from cacheproxy.kube.protobuf import object_resource_version
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.rv import decode_continue, encode_continue
from cacheproxy.kube.table import TablePrinter, has_printer, printer_for
from cacheproxy.kube.versions import NEWEST, KubeVersion
from cacheproxy.server.consistent import ConsistentReads
from cacheproxy.server.query import Query, matches, select_keys
from cacheproxy.server.readexec import decide
from cacheproxy.server.readplan import ReadRequest, ReadState, Refuse, Serve
from cacheproxy.server.settling import ABSENT, KeyChanges
from cacheproxy.server.snapshots import KEY, Snapshot, SnapshotCache, build_snapshot
from cacheproxy.serving import BodyPart

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

    def parts(self, meta: bytes | None = None) -> list[BodyPart]:
        """The body as the bytes to write one after the other: the head (with ``meta``, its own
        by default), the stored bytes of every item with the separators between them, the tail.
        Nothing is copied."""
        head = self.head(meta)
        if not self.items:
            return [head, b"]}"]
        parts = self._item_parts(self.items)
        parts[0] = head + parts[0]
        parts.append(b"]}")
        return parts

    def _item_parts(
        self, items: Sequence[Entry], off_loop: Unpackers | None = None
    ) -> list[BodyPart]:
        """``items`` (at least one) with the separators between them, from the first one's
        opening to the last one's end."""
        if self.rtype.builtin:
            # Typed lists of built-in kinds carry items without kind/apiVersion (as the API
            # server): "{" and the body, so every separator is the same ",{" — the joiner of
            # a compressed store's blocks, whose runs of items come as one piece each.
            runs = stored_bodies(items, off_loop=off_loop, joined=True)
            parts: list[BodyPart] = [JOINER] * (2 * len(runs))
            parts[0] = b"{"
            parts[1::2] = runs
        else:  # the type prefix and the body, "," between
            bodies = stored_bodies(items, off_loop=off_loop)
            parts = [b","] * (3 * len(bodies) - 1)
            parts[0::3] = list(map(_PREFIX, items))
            parts[1::3] = bodies
        return parts

    @property
    def packed(self) -> bool:
        """Some items are kept compressed (their bodies are made as the list is written)."""
        return any(e.packer is not None for e in self.items)

    def length(self, meta: bytes | None = None) -> int:
        """The bytes :meth:`parts` would give, from the items' sizes (nothing decompressed)."""
        items = self.items
        head = len(self.head(meta)) + 2  # and the closing "]}"
        if not items:
            return head
        sizes = sum(e.size for e in items)
        if self.rtype.builtin:  # "{" + body, no prefix; "," between items
            return head + sizes - sum(len(e.prefix) for e in items) + 2 * len(items) - 1
        return head + sizes + len(items) - 1

    def groups(self, meta: bytes | None = None) -> Iterator[list[BodyPart]]:
        """:meth:`parts` in consecutive groups of :data:`GROUP_ITEMS` items, each group's
        bodies made (decompressed) only when it is asked for: a long list of a compressed store
        never holds more than a group of plain bodies per reader. The groups may be made in
        another thread than the event loop's (one at a time): they decompress with contexts
        of their own."""
        items = self.items
        head = self.head(meta)  # on the caller's thread
        if not items:
            yield [head, b"]}"]
            return
        off_loop: Unpackers = {}
        for start in range(0, len(items), GROUP_ITEMS):
            parts = self._item_parts(items[start : start + GROUP_ITEMS], off_loop)
            parts[0] = (b"," if start else head) + parts[0]
            if start + GROUP_ITEMS >= len(items):
                parts.append(b"]}")
            yield parts


_PREFIX = operator.attrgetter("prefix")
GROUP_ITEMS = 1024
"""Items whose packed bodies a streamed list decompresses at once (~5 MB of pods)."""
_WAITERS = itertools.count()
"""Orders the reads waiting for one RV (futures do not compare)."""


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
    """What reads with RV unset may ask upstream (:mod:`.consistent`); None: they are answered
    from the cache as it is (mode ``cache``)."""
    keeps_managed_fields: bool = False
    """The stored objects have their ``metadata.managedFields`` (a transform that keeps them):
    a client asking to drop them gets its objects re-encoded."""
    kube_version: Callable[[], KubeVersion] = lambda: NEWEST
    """The version of the API server this resource is answered as (the server sets it: the
    upstream's, once its ``/version`` is known)."""
    last_read: float = 0.0
    """When a read was last answered from this resource (``time.monotonic``; 0: never)."""
    write_settle: float = 1.0
    """How long the answer of a write through the daemon to this resource is held until the
    cache holds the write (:mod:`.settling`); 0: answered at once. The daemon sets 0 for a
    resource cached with selectors (the events of the objects outside them never come)."""
    namespace: str | None = None
    """The one namespace cached (None: every one): writes elsewhere are not held."""
    _waiting: list[tuple[int, int, asyncio.Future[None]]] = field(default_factory=list)
    """Reads waiting for the cache to reach an RV: a heap of (rv, sequence, future), each
    future done as the store reaches its RV (no reader wakes for an RV it does not wait
    for)."""
    _changes: int = 0
    """Objects changed (events applied, relists) since the start."""
    _quiet_at: int | None = None
    """:attr:`_changes` when a read last found the cache behind upstream's RV after waiting
    for its events: while no object changes (bookmarks may move the RV: 1.32 sends them as
    etcd's revision moves), the next read skips the probe (see :mod:`.readplan`). A heuristic
    of cost only: a quiet read is still forwarded or confirmed, never served unproven."""
    _deleting: dict[str, tuple[str | None, float]] = field(default_factory=dict)
    """Deletes through the daemon whose answer carried no resourceVersion (a ``Status``), their
    object still in the cache: key -> (its uid, None if unknown; until when reads wait)."""

    def __post_init__(self) -> None:
        self._settling = KeyChanges(self.informer.store)
        self.informer.subscribe(self._observe)

    def _observe(self, event: InformerEvent) -> None:
        """Count the changes, and wake the readers waiting for an RV the store reached."""
        match event:
            case Relisted():
                # The EventLog restarted: no older state can be rebuilt, so none may be served.
                self.snapshots.clear()
                self._changes += 1
            case Changed():
                self._changes += 1
        waiting = self._waiting
        if waiting:
            rv = self.resource_version
            while waiting and waiting[0][0] <= rv:
                future = heapq.heappop(waiting)[2]
                if not future.done():
                    future.set_result(None)
        if self._settling:
            self._settling.observe(event)

    @property
    def prints_tables(self) -> bool:
        """Whether this resource's Tables are printed here as the API server prints them: a
        built-in kind with a printer of ours, or a custom resource (its CRD's columns). A
        built-in kind without one may have columns of its own upstream (PriorityClass,
        RoleBinding): its Tables are asked of upstream where the read can be passed through."""
        return not self.rtype.builtin or has_printer(self.rtype.group, self.rtype.resource)

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

    def holds(self, digest: KeyDigest) -> bool:
        """Whether the cache's keys are those of ``digest`` (a consistent read's confirmation;
        one pass over the keys, nothing kept)."""
        store = self.informer.store
        return len(store) == digest.count and key_digest(store.keys()) == digest

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

    def deleted(self, namespace: str | None, name: str, answer: bytes) -> None:
        """A delete of one of this resource's objects passed through the daemon and upstream
        answered ``answer``. The object (graceful deletion, finalizers), at its RV: as any
        write. A ``Status`` (deleted at once; no RV to wait for): reads with RV unset that
        follow, within the ``after_write`` window, wait until the cache no longer holds the
        object (the same uid under that key)."""
        reads = self.consistency
        if reads is None:
            return
        if _answer_rv(answer) > 0:
            self.wrote(answer)
            return
        key = self.key_of(namespace, name)
        entry = self.informer.store.get(key)
        if entry is None:
            return  # the cache has it gone already
        uid = _status_uid(answer) or _uid(entry.raw)
        self._deleting[key] = (uid, reads.clock() + reads.options.after_write)

    # ------------------------------------------------------------------ writes held

    def settles(self, namespace: str | None, *, dry_run: bool) -> bool:
        """Whether a write in ``namespace`` is held until the cache holds it (:mod:`.settling`)."""
        if self.write_settle <= 0 or dry_run:
            return False
        return self.namespace is None or namespace == self.namespace

    def versions_of(self, keys: Iterator[str] | Sequence[str]) -> dict[str, int]:
        """The resourceVersion the cache holds of each key now (:data:`.settling.ABSENT`: none):
        what a write's answer waits to see change when it carries no resourceVersion."""
        store = self.informer.store
        versions = {}
        for key in keys:
            entry = store.get(key)
            versions[key] = ABSENT if entry is None else entry.rv
        return versions

    def selected_versions(self, query: Query) -> dict[str, int]:
        """:meth:`versions_of` every entry ``query`` selects (a ``deletecollection``'s)."""
        store = self.informer.store
        keys, exact = select_keys(store, query, self.index_paths)
        candidates = store.keys() if keys is None else keys
        return {
            key: entry.rv
            for key in candidates
            if (entry := store.get(key)) is not None
            and (exact or matches(entry, query, self.rtype, store))
        }

    async def settle(self, answer: bytes | None, before: Mapping[str, int]) -> bool | None:
        """Hold a write's answer until the cache holds the write: the answer's resourceVersion
        when it carries one (``answer``, JSON or protobuf; None: not to be trusted for that, a
        ``deletecollection``'s), else every entry of ``before`` changed — for
        :attr:`write_settle` seconds at most. Whether it got there (False: gave up); None when
        there was nothing to wait for, or the upstream watch is down (its event may not come)."""
        if not self.informer.watch_live:
            return None
        rv = _answer_rv(answer) if answer is not None else 0
        if rv > 0:
            if self.resource_version >= rv:
                return None
            try:
                await self.wait_for(rv, within=self.write_settle)
            except ApiError:
                return False
        elif not before:
            return None
        elif not await self._settling.wait(before, within=self.write_settle):
            return False
        # The watches the same event woke write it first: this task was woken before them (the
        # resource subscribed before its watch hub), and a connection's writes go out at the
        # end of the loop's turn. Straight from the API server, too, the event tends to come
        # before the write's answer.
        await asyncio.sleep(0)
        return True

    # ------------------------------------------------------------------ RVs

    async def wait_for(self, rv: int, *, within: float | None = None) -> None:
        """Until the cache reached ``rv`` (≤ ``within``, by default ``rv_wait`` s), else 504 too
        large RV."""
        if self.resource_version >= rv:
            return
        future = asyncio.get_running_loop().create_future()
        entry = (rv, next(_WAITERS), future)
        heapq.heappush(self._waiting, entry)
        try:
            async with asyncio.timeout(self.rv_wait if within is None else within):
                await future
        except TimeoutError:
            raise status.too_large_resource_version(rv, self.resource_version) from None
        finally:
            if not future.done() or future.cancelled():  # timed out or cancelled: given up
                future.cancel()
                with contextlib.suppress(ValueError):
                    self._waiting.remove(entry)
                    heapq.heapify(self._waiting)

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

    def list(self, query: Query, opts: ListOptions, *, at: int | None = None) -> ServedList:
        """One page of ``query`` as ``opts`` say, from the current state or (``at``) the state
        at an older RV (:meth:`decide` chose it; see the module)."""
        if at is not None and at != self.resource_version:
            try:
                older = self.snapshot(at, query, keep=opts.limit > 0)
            except TooOld:
                raise self._expired(opts) from None
            entries = older.entries
            start, end = _bounds(entries, query, opts, key=KEY)
            last = entries[end - 1].key if end else ""
            return _page(
                self.rtype,
                query,
                at,
                entries[start:end],
                end=end,
                total=len(entries),
                last=last,
                root=self._key_root(opts),
            )
        rv = self.resource_version
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

    def _expired(self, opts: ListOptions) -> ApiError:
        """The API server's 410 for a list whose RV (or continue token's) is gone."""
        if opts.continue_token:
            key = decode_continue(opts.continue_token).key
            return status.expired(
                status.CONTINUE_EXPIRED_MESSAGE, continue_token=encode_continue(-1, key)
            )
        return status.expired("The resourceVersion for the provided list is too old.")

    # ------------------------------------------------------------------ the read planner

    def state(self, *, can_forward: bool = False, get: bool = False) -> ReadState:
        """What the read planner sees of this resource now (for a ``get`` or not)."""
        rv = self.resource_version
        oldest = self.informer.event_log.oldest_resumable
        reads = self.consistency
        if reads is None:
            return ReadState(rv, oldest, mode="cache", rv_wait=self.rv_wait)
        options = reads.options
        written, write_wait = reads.written(), reads.write_window()
        if self._deleting:
            # A delete the cache has not seen yet: wait for the cache to move on, and see.
            left = self._deletions_pending(reads.clock())
            if left > 0:
                written, write_wait = max(written, rv + 1), max(write_wait, left)
        return ReadState(
            rv,
            oldest,
            mode=options.mode,
            watch_live=self.informer.watch_live,
            written=written,
            write_wait=write_wait,
            quiet=self._quiet_at == self._changes,
            can_forward=can_forward,
            can_confirm=reads.can_confirm(get=get),
            on_timeout=options.on_timeout,
            catch_up=options.confirm_after,
            rv_wait=self.rv_wait,
        )

    def _deletions_pending(self, now: float) -> float:
        """Seconds the longest pending delete may still be waited for (0: none left); those
        the cache has seen, or whose window is over, are forgotten."""
        store, left = self.informer.store, 0.0
        for key, (uid, until) in list(self._deleting.items()):
            entry = store.get(key)
            if until <= now or entry is None or (uid is not None and _uid(entry.raw) != uid):
                del self._deleting[key]
            else:
                left = max(left, until - now)
        return left

    def quiet(self) -> None:
        self._quiet_at = self._changes

    async def read_list(self, query: Query, opts: ListOptions) -> ServedList:
        """A list (one page) of ``query`` as ``opts`` say, answered from the cache alone: the
        state the read planner chose (:func:`.readexec.decide`), never upstream's."""
        read = ReadRequest.of("list", opts, kube=self.kube_version())
        answer = await decide(self, read, opts=opts)
        assert isinstance(answer, Serve)  # nothing is forwarded when nothing may be
        return self.list(query, opts, at=answer.at)

    def refusal(self, refuse: Refuse, opts: ListOptions | None) -> ApiError:
        """The API server's error for the read planner's ``refuse`` (:func:`.readexec.decide`)."""
        if refuse.reason == "too_large":
            return status.too_large_resource_version(refuse.rv, self.resource_version)
        if refuse.reason == "timeout":
            reads = self.consistency
            limit = reads.options.timeout if reads is not None else self.rv_wait
            return ApiError(
                status.status_body(
                    code=504,
                    reason="Timeout",
                    message=f"Timeout: not a consistent read: {refuse.why} within {limit:g}s",
                    details={"retryAfterSeconds": 1},
                )
            )
        self.snapshots.forget_older(self.informer.event_log.oldest_resumable)
        return self._expired(opts or ListOptions())

    def _key_root(self, opts: ListOptions) -> str:
        """What the start key of a page's continue token begins with, as the upstream's version
        writes it (1.32 roots the first page's, not the pages after it; 1.36 every page's)."""
        continued = bool(opts.continue_token)
        rooted = self.kube_version().roots_page_keys(self.rtype.qualified, continued=continued)
        return "/" if rooted else ""

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


def _status_uid(answer: bytes) -> str | None:
    """The deleted object's uid in a delete's ``Status`` answer (``details.uid``), if JSON."""
    try:
        doc = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return None
    details = doc.get("details") if isinstance(doc, dict) else None
    uid = details.get("uid") if isinstance(details, dict) else None
    return uid if isinstance(uid, str) and uid else None


def _uid(raw: bytes) -> str | None:
    """An object's ``metadata.uid`` (None without one)."""
    meta = orjson.loads(raw).get("metadata") or {}
    uid = meta.get("uid")
    return uid if isinstance(uid, str) and uid else None


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
