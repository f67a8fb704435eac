"""The coalescing queue: client-go's classic ``DeltaFIFO``, for consumers of the latest state only.

The proxy never uses it (it needs every event in order: :class:`~cacheproxy.informer.queue.
InOrderQueue`). It is offered to library users whose handlers only care about the current state of
each object: while a key waits in the queue, everything that happens to it is gathered in that
key's delta list, and the consumer receives the whole list at once (:class:`Deltas`).

It takes what the Reflector writes (``put`` of :class:`Delta`, :class:`Replaced` and
:class:`Bookmark`), as :class:`~cacheproxy.informer.queue.EventQueue` describes. What ``get``
returns differs: a :class:`Deltas` per key (or a :class:`Bookmark`), so its consumer is a
latest-state processing loop, not ``Store.apply`` of single events.

Guarantees:

- **Per-key order is preserved**: a key's deltas are delivered in the order they were put. Keys are
  delivered in FIFO order of their *first* pending delta; order *across* keys is not the event
  order (a key that changes again while queued keeps its place).
- **Only the latest state is guaranteed**: a consumer that applies the deltas of each
  :class:`Deltas` in order ends with the same state as one that applied every event, but it sees
  the intermediate states late and batched, and does not see the order between keys.
- **Deletes are never lost**: a delete is never merged into, or dropped behind, a later event.
  Two consecutive deletes of one key are collapsed into one (client-go's ``dedupDeltas``), keeping
  the one with more information (a real object beats a tombstone). A delete of a key that is
  neither pending nor in the consumer's store is ignored: it was already reported, e.g. by a relist
  tombstone (client-go's ``DeltaFIFO.Delete``).
- **Deletes missed during a relist get tombstones**: a :class:`Replaced` queues a ``"Replaced"``
  delta for every listed object and, for every key that is pending or in the consumer's store but
  absent from the list, a ``"Deleted"`` delta carrying :class:`DeletedFinalStateUnknown` with the
  last known object (which may be stale).
- **Bounded**: at most ``maxsize`` pending keys. A ``put`` that would add a key waits while the
  queue is full; a ``put`` for a key already pending never waits (it joins that key's list). A
  :class:`Replaced` waits for room, then is taken whole (it may take the queue past ``maxsize``:
  its objects are already held by the item); so may :meth:`CoalescingQueue.resync`, whose deltas
  point at objects the consumer's store already holds. The deltas of one pending key are not
  bounded, as in client-go.

Delta types (client-go's ``DeltaType``) and where they come from:

==============  ==========================================================================
``"Added"``     a watch ``ADDED`` (:class:`Delta` type ``ADDED``)
``"Updated"``   a watch ``MODIFIED``
``"Deleted"``   a watch ``DELETED`` (the object's final state), or a relist tombstone
                (:class:`DeletedFinalStateUnknown`)
``"Replaced"``  an object of a :class:`Replaced` (a relist; client-go with
                ``EmitDeltaTypeReplaced``, so a relist is never mistaken for a resync)
``"Sync"``      :meth:`CoalescingQueue.resync` (client-go's periodic resync)
==============  ==========================================================================

Consumer contract (client-go runs ``Pop``'s process function under the queue lock; here the event
loop gives the same atomicity): apply what ``get`` returns to your store **before your next
await**, so the queue's view of that store (:class:`KnownObjects`) is never behind what it handed
out. Otherwise a delete arriving in between may be taken for an already reported one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from cacheproxy.informer.events import Changed
from cacheproxy.informer.informer import SharedInformer
from cacheproxy.informer.queue import (
    Bookmark,
    DeletedFinalStateUnknown,
    EventQueue,
    QueueItem,
    Replaced,
)
from cacheproxy.informer.store import Store
from cacheproxy.kube.keys import object_key, object_namespace_name

__all__ = [
    "CoalescedDelta",
    "CoalescingInformer",
    "CoalescingQueue",
    "DeletedFinalStateUnknown",
    "DeltaType",
    "Deltas",
    "KnownObjects",
]

DeltaType = Literal["Added", "Updated", "Deleted", "Replaced", "Sync"]
"""client-go's ``DeltaType`` names (the mapping from watch types is in the module docstring)."""

_FROM_WATCH_TYPE: dict[str, DeltaType] = {
    "ADDED": "Added",
    "MODIFIED": "Updated",
    "DELETED": "Deleted",
}


@dataclass(frozen=True, slots=True)
class CoalescedDelta:
    """One change of one key, as the coalescing queue records it."""

    type: DeltaType
    object: dict[str, Any] | DeletedFinalStateUnknown[dict[str, Any] | None]
    """The object (the consumer owns it; do not mutate it while it may still be queued); a
    tombstone for a ``"Deleted"`` found by a relist."""
    rv: int
    """The collection RV at which this state was seen: the watch event's RV; the relist RV for
    ``"Replaced"`` deltas and relist tombstones; the queue's latest RV for ``"Sync"``."""


@dataclass(frozen=True, slots=True)
class Deltas:
    """Everything that happened to ``key`` while it waited in the queue, oldest first."""

    key: str
    deltas: tuple[CoalescedDelta, ...]
    in_initial_list: bool = False
    """Popped before the queue had synced (client-go's ``isInInitialList``)."""

    @property
    def newest(self) -> CoalescedDelta:
        """The latest state of the key (never empty: a key is queued with its first delta)."""
        return self.deltas[-1]


class KnownObjects(Protocol):
    """The consumer's store as the queue sees it: its keys and the last object of each (client-go's
    ``KeyListerGetter``). A ``dict[str, dict[str, Any]]`` keyed like the queue is one."""

    def keys(self) -> Iterable[str]: ...

    def get(self, key: str, /) -> dict[str, Any] | None: ...


def _key_of(obj: dict[str, Any]) -> str:
    return object_key(*object_namespace_name(obj))


class CoalescingQueue:
    """Per-key delta lists in FIFO order of keys (client-go's ``DeltaFIFO``); see the module.

    ``known_objects`` is the consumer's store: relists compare against it to find missed deletions,
    resyncs read it, and deletes of keys it no longer holds are recognised as already reported.
    ``maxsize`` bounds the pending keys (≤ 0: unbounded).

    ``get`` returns a :class:`Bookmark` only when no key is pending, and then at the latest RV the
    queue has taken in (:attr:`resource_version`): the consumer has by then received every change up
    to it. Bookmarks put while keys are pending are folded into that one.
    """

    def __init__(self, known_objects: KnownObjects, *, maxsize: int = 10_000) -> None:
        self._known = known_objects
        self._maxsize = maxsize
        self._order: deque[str] = deque()  # pending keys, by first pending delta
        self._items: dict[str, list[CoalescedDelta]] = {}  # same keys as _order
        self._resource_version = 0
        self._bookmark_pending = False
        # client-go: `populated` is set by the first Add/Update/Delete/Replace; the first Replace
        # of an unpopulated queue sets `initialPopulationCount`, decremented by each pop.
        self._populated = False
        self._initial_population_count = 0
        self._not_empty = asyncio.Event()
        self._not_full = asyncio.Event()

    @property
    def resource_version(self) -> int:
        """The RV of the latest item taken in (a delta, a relist or a bookmark); 0 before any."""
        return self._resource_version

    @property
    def has_synced(self) -> bool:
        """True once every key queued by the first :class:`Replaced` has been popped (or at once, as
        in client-go, if a watch event came before any relist)."""
        return self._populated and self._initial_population_count == 0

    def qsize(self) -> int:
        """How many items ``get`` would return without waiting: pending keys, plus one if a bookmark
        is pending (it comes after them)."""
        return len(self._order) + (1 if self._bookmark_pending else 0)

    async def put(self, item: QueueItem) -> None:
        if isinstance(item, Bookmark):
            # Carries no object: never waits, never occupies a key.
            self._resource_version = item.rv
            self._bookmark_pending = True
            self._not_empty.set()
            return
        if isinstance(item, Replaced):
            while self._is_full():
                await self._wait_not_full()
            self._replace(item)
            return
        key = _key_of(item.object)
        while True:
            if item.type == "DELETED" and key not in self._items and self._known.get(key) is None:
                # Neither pending nor in the store: already reported (e.g. by a relist tombstone).
                self._populated = True
                self._resource_version = item.rv
                return
            if key in self._items or not self._is_full():
                break
            await self._wait_not_full()
        self._populated = True
        self._resource_version = item.rv
        self._append(key, CoalescedDelta(_FROM_WATCH_TYPE[item.type], item.object, item.rv))

    async def get(self) -> Deltas | Bookmark:
        """The oldest pending key's deltas, removed from the queue; waits while there is nothing."""
        while (item := self.get_nowait()) is None:
            self._not_empty.clear()
            await self._not_empty.wait()
        return item

    def get_nowait(self) -> Deltas | Bookmark | None:
        if self._order:
            key = self._order.popleft()
            deltas = self._items.pop(key)
            in_initial_list = not self.has_synced
            if self._initial_population_count > 0:
                self._initial_population_count -= 1
            self._not_full.set()
            return Deltas(key, tuple(deltas), in_initial_list)
        if self._bookmark_pending:
            self._bookmark_pending = False
            return Bookmark(self._resource_version)
        return None

    def resync(self) -> None:
        """Queue a ``"Sync"`` delta for every key of the consumer's store that has nothing pending.

        A pending key is skipped: its store object is older than what is queued, and a resync with
        it would deliver a stale state (client-go's ``syncKeyLocked``). Never waits (see module).
        """
        for key in list(self._known.keys()):
            if key in self._items:
                continue
            obj = self._known.get(key)
            if obj is not None:
                self._append(key, CoalescedDelta("Sync", obj, self._resource_version))

    def _replace(self, item: Replaced) -> None:
        """client-go's ``DeltaFIFO.Replace``: listed objects, then tombstones for vanished keys."""
        listed: set[str] = set()
        for obj in item.objects:
            key = _key_of(obj)
            listed.add(key)
            self._append(key, CoalescedDelta("Replaced", obj, item.rv))
        tombstones = 0
        for key, deltas in list(self._items.items()):
            if key in listed:
                continue
            newest = deltas[-1].object
            # Never nest tombstones: a tombstone's last known object is the one it carries.
            last = newest.object if isinstance(newest, DeletedFinalStateUnknown) else newest
            self._append(key, _tombstone(key, last, item.rv))
            tombstones += 1
        for key in list(self._known.keys()):
            if key in listed or key in self._items:
                continue
            self._append(key, _tombstone(key, self._known.get(key), item.rv))
            tombstones += 1
        if not self._populated:
            self._populated = True
            self._initial_population_count = len(listed) + tombstones
        self._resource_version = item.rv

    def _append(self, key: str, delta: CoalescedDelta) -> None:
        deltas = self._items.get(key)
        if deltas is None:
            self._items[key] = [delta]
            self._order.append(key)
            self._not_empty.set()
        elif delta.type == "Deleted" and deltas[-1].type == "Deleted":
            # client-go's isDeletionDup: keep the one with more information; the older one unless
            # it is only a tombstone.
            if isinstance(deltas[-1].object, DeletedFinalStateUnknown):
                deltas[-1] = delta
        else:
            deltas.append(delta)

    def _is_full(self) -> bool:
        return 0 < self._maxsize <= len(self._items)

    async def _wait_not_full(self) -> None:
        self._not_full.clear()
        await self._not_full.wait()


def _tombstone(key: str, last: dict[str, Any] | None, rv: int) -> CoalescedDelta:
    return CoalescedDelta("Deleted", DeletedFinalStateUnknown(key, last), rv)


class CoalescingInformer(SharedInformer):
    """A :class:`~cacheproxy.informer.informer.SharedInformer` whose handlers get the latest
    state of each object, batched per key (a :class:`CoalescingQueue` between the Reflector and
    the store, as client-go's informers had before ``RealFIFO``).

    Its handlers' ``on_add`` says whether an object came with the first list; its subscribers
    get :class:`~.events.Changed` for each change applied (its ``rv`` the store's, which a
    coalesced change may not have had upstream), the bookmarks and the sync — never a
    :class:`~.events.Relisted` (a relist reaches it as per-key deltas). It keeps no EventLog:
    nothing could resume a watch from changes merged across RVs. It cannot be restored from a
    snapshot."""

    def _make_queue(self, size: int) -> EventQueue[Any]:
        self._coalescing = CoalescingQueue(_StoreObjects(self.store), maxsize=size)
        return self._coalescing

    def _decode(self) -> None:
        # The queue keys and merges parsed objects itself; they become entries as applied.
        return None

    def _log_events(self) -> None:
        pass  # see the class: no EventLog

    def restore(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"informer {self.name}: a coalescing informer cannot be restored")

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._sync_of_an_empty_list(), name=f"{self.name}-sync-watch")
            tg.create_task(super().run(), name=f"{self.name}-informer")

    async def _sync_of_an_empty_list(self) -> None:
        """An empty first list queues nothing to pop: notice the sync anyway (the Reflector puts
        its list on the queue before it says it synced; a list with objects is noticed as its
        last key is popped)."""
        await self.reflector.synced.wait()
        if self._coalescing.has_synced:
            await self._synced_now()

    async def _apply(self, item: Any) -> None:
        if not isinstance(item, Deltas):
            await super()._apply(item)
            return
        await self._apply_deltas(item)
        if self._coalescing.has_synced:
            await self._synced_now()

    async def _apply_deltas(self, item: Deltas) -> None:
        """Each recorded delta of one key, in order (client-go's ``processDeltas``)."""
        store, handlers = self.store, self._handlers
        for delta in item.deltas:
            self.events_processed += 1
            self.last_event_at = now = self._clock()
            obj = delta.object
            if delta.type == "Deleted":
                if isinstance(obj, DeletedFinalStateUnknown):
                    prev = store.delete(obj.key)
                    last = prev or (store.make_entry(_copy(obj.object)) if obj.object else None)
                    if last is not None:
                        rv = store.resource_version
                        self._publish(Changed(rv, "DELETED", last, prev, now))
                        await handlers.notify(
                            ("delete", DeletedFinalStateUnknown(obj.key, last), None)
                        )
                    continue
                entry = store.make_entry(_copy(obj))
                prev = store.delete(entry.key)
                self._publish(Changed(store.resource_version, "DELETED", entry, prev, now))
                await handlers.notify(("delete", entry, None))
                continue
            assert not isinstance(obj, DeletedFinalStateUnknown)
            entry = store.make_entry(_copy(obj))
            rv = max(store.resource_version, delta.rv)
            prev = store.put(entry, rv=rv)
            self._publish(Changed(rv, "ADDED" if prev is None else "MODIFIED", entry, prev, now))
            if prev is None:
                await handlers.notify(("add", entry, item.in_initial_list))
            else:
                await handlers.notify(("update", prev, entry))

    async def _resync(self) -> None:
        """A Sync delta for every key with nothing pending."""
        self._coalescing.resync()


class _StoreObjects:
    """The coalescing queue's view of the store: keys and last known objects."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def keys(self) -> Iterator[str]:
        return self._store.keys()

    def get(self, key: str, /) -> dict[str, Any] | None:
        entry = self._store.get(key)
        return entry.object() if entry is not None else None


def _copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy the store's transform may modify (the queue may still hold the original)."""
    out = dict(obj)
    if isinstance(out.get("metadata"), dict):
        out["metadata"] = dict(out["metadata"])
    return out
