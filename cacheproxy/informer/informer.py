"""SharedInformer: one Reflector, one Store, one EventLog, any number of handlers.

The flow is one-way: the Reflector puts what upstream said on the EventQueue (objects already in
their stored form: the informer gives it ``Store.make_entry`` as its decode, so a large list is
never held parsed); the processing loop takes the items in order and, for each, synchronously
applies it to the Store (which moves its RV with it), appends to the EventLog and calls the
*listeners* (inline, for consumers such as the daemon's watch fan-out that must see every event
and never block), then hands a notification to every *handler*.

Handlers (:mod:`.handlers`: ``on_add(entry, in_initial_list)``, ``on_update(old, new)``,
``on_delete(entry or tombstone)``) run in their own task with their own bounded buffer, so a slow
handler delays only itself — unless its overflow policy is ``BLOCK``, which makes the informer
wait for it (the default for library users: nothing is lost). Handlers receive :class:`Entry`
objects: the bytes the store keeps, parsed only when the handler calls ``entry.object()``.

Guarantees: per informer, handlers see events in RV order; after a relist they see the
difference between the old and new state (adds, updates, and deletes carrying the last known
object as a :class:`DeletedFinalStateUnknown` tombstone). Event listeners get every change the
EventLog records, in order. After a relist (not the first sync), difference listeners get what
it changed as one :class:`RelistDifference` — the changed objects and the last known state of
the vanished ones, as upstream's list told them, with no RVs made up for the deletions (when
each happened is unknown; a consumer that must replay them as events decides how, as the
server's watch fan-out does) — and then the relist listeners hear of it.

A warm restart (:meth:`SharedInformer.restore`, before :meth:`~SharedInformer.run`) starts from a
state read from disk: it is applied as the first sync is, and the informer counts as synced only
once upstream confirmed it (:class:`CacheState`), unless ``serve_stale`` says to serve it at once.
A relist instead (upstream no longer has its RV) delivers its difference as any relist does.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cacheproxy.informer import coalescing
from cacheproxy.informer.coalescing import DeletedFinalStateUnknown
from cacheproxy.informer.eventlog import EventLog, LogEvent
from cacheproxy.informer.handlers import (
    HandlerRegistration,
    Handlers,
    Overflow,
    ResourceEventHandler,
)
from cacheproxy.informer.listwatch import ListerWatcher
from cacheproxy.informer.metrics import InformerMetrics
from cacheproxy.informer.queue import Bookmark, Delta, EventQueue, InOrderQueue, QueueItem, Replaced
from cacheproxy.informer.reflector import (
    RESUME_CONFIRMATION,
    Confirmed,
    Reflector,
    ReflectorOptions,
    Restored,
)
from cacheproxy.informer.store import Entry, Store

__all__ = ["CacheState", "RelistDifference", "SharedInformer"]

_L = TypeVar("_L")


class CacheState(enum.Enum):
    """Where an informer's state came from (``/status`` shows it)."""

    SYNCING = "syncing"
    """Nothing yet: the first sync is under way."""
    RESTORED = "restored"
    """Read from disk; upstream has not confirmed it yet."""
    CONFIRMED = "confirmed"
    """Read from disk, and the watch resumed from its RV was accepted upstream."""
    SYNCED = "synced"
    """From upstream: a list or a watch-list (and the events since)."""


@dataclass(frozen=True, slots=True)
class RelistDifference:
    """What a relist changed in the store (immutable by contract, like the entries)."""

    rv: int
    """The relist's RV: the store is at it now, and the EventLog starts there."""
    before: int
    """The RV the store was at before: every difference happened after it, by ``rv``."""
    changed: Sequence[tuple[Entry, Entry | None]]
    """``(new, previous)`` for each object that is new (previous None) or not the same."""
    gone: Mapping[str, Entry]
    """The last known state of each vanished object, by key."""


class SharedInformer:
    """Keeps ``store`` equal to one upstream collection and tells handlers what changed."""

    def __init__(
        self,
        lw: ListerWatcher,
        *,
        name: str,
        store: Store,
        event_log: EventLog | None = None,
        coalesce: bool = False,
        queue_size: int = 10_000,
        reflector_options: ReflectorOptions | None = None,
        resync_period: float | None = None,
        metrics: InformerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        freeze_gc_after_sync: bool = False,
    ) -> None:
        self.name = name
        self.freeze_gc_after_sync = freeze_gc_after_sync
        """After the first sync, move everything to the GC's permanent generation
        (``gc.freeze()``): later collections skip the cache's long-lived objects. Process-wide,
        so off by default for library users; the daemon turns it on (docs/design.md §3)."""
        self.store = store
        self.event_log = event_log if event_log is not None else EventLog(clock=clock)
        self.queue: EventQueue[QueueItem | coalescing.Deltas] = (
            coalescing.CoalescingQueue(_StoreObjects(store), maxsize=queue_size)
            if coalesce
            else InOrderQueue(queue_size)
        )
        self.reflector = Reflector(
            lw,
            self.queue,
            name=name,
            options=reflector_options,
            clock=clock,
            sleep=sleep,
            metrics=metrics,
            # In order, objects become entries as they are read (parsed dicts die young, and a
            # large list is never held parsed: docs/design.md §6); the coalescing queue keys and merges
            # parsed objects itself.
            decode=None if coalesce else store.make_entry,
        )
        self.resync_period = resync_period
        self._sleep = sleep
        self._handlers = Handlers(name)
        self._listeners: list[Callable[[LogEvent], None]] = []
        self._relist_listeners: list[Callable[[int], None]] = []
        self._difference_listeners: list[Callable[[RelistDifference], None]] = []
        self._bookmark_listeners: list[Callable[[int], None]] = []
        self._synced = asyncio.Event()
        self._running = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.relists = 0
        self.state = CacheState.SYNCING
        self.serve_stale = False
        """A restored state counts as synced (is served) before upstream confirmed it."""
        self._apply_after: Callable[[], Awaitable[object]] | None = None
        self.events_processed = 0
        self.last_event_at: float | None = None
        self._clock = clock

    # ------------------------------------------------------------------ state

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    @property
    def watch_live(self) -> bool:
        """Whether upstream's changes reach this informer now (:attr:`Reflector.watch_live`)."""
        return self.reflector.watch_live

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    def restore(
        self,
        entries: list[Entry],
        rv: int,
        *,
        serve_stale: bool = False,
        apply_after: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Start from ``entries`` at ``rv`` (a snapshot, :mod:`.persistence`) instead of a first
        sync: call before :meth:`run`. Synced once upstream confirms it (see the module), or at
        once with ``serve_stale``.

        Without ``serve_stale`` the state is applied once the resumed watch answered (at most
        the confirmation's moment later), or once ``apply_after()`` returns: applying it — every
        object indexed, then a collection — holds the event loop for tens of ms (10 000 pods),
        which the watches being opened (this one's, or all of a daemon's: ``apply_after``) would
        otherwise wait for; after their answers it runs while the confirmation waits its moment
        (docs/operations.md, "Warm restarts")."""
        if self._running or self.has_synced:
            raise RuntimeError(f"informer {self.name}: restore before it runs")
        if isinstance(self.queue, coalescing.CoalescingQueue):
            raise TypeError(f"informer {self.name}: a coalescing informer cannot be restored")
        self.serve_stale = serve_stale
        self._apply_after = apply_after
        self.reflector.resume(Restored(entries, rv))

    # ------------------------------------------------------------------ consumers

    def add_listener(self, listener: Callable[[LogEvent], None]) -> Callable[[], None]:
        """Called inline for every change, in order (must be fast, never block).
        Returns a function that removes it."""
        return _subscribe(self._listeners, listener)

    def add_relist_listener(self, listener: Callable[[int], None]) -> Callable[[], None]:
        """Called inline after the store was replaced by a relist at the given RV."""
        return _subscribe(self._relist_listeners, listener)

    def add_difference_listener(
        self, listener: Callable[[RelistDifference], None]
    ) -> Callable[[], None]:
        """Called inline with what a relist changed (not for the first sync), before the relist
        listeners."""
        return _subscribe(self._difference_listeners, listener)

    def add_bookmark_listener(self, listener: Callable[[int], None]) -> Callable[[], None]:
        """Called inline when a bookmark moves the store's RV without a change."""
        return _subscribe(self._bookmark_listeners, listener)

    def add_handler(
        self,
        handler: ResourceEventHandler,
        *,
        buffer: int = 10_000,
        overflow: Overflow = Overflow.BLOCK,
        on_overflow: Callable[[], None] | None = None,
    ) -> HandlerRegistration:
        """Register ``handler`` (see :mod:`.handlers`): added once synced, it first gets the
        current state as adds of its initial list."""
        reg = self._handlers.add(
            handler,
            buffer=buffer,
            overflow=overflow,
            on_overflow=on_overflow,
            current=self.store.entries() if self.has_synced else None,
        )
        if self._running:
            self._handlers.start(reg)
        return reg

    def remove_handler(self, reg: HandlerRegistration) -> None:
        """Unregister ``reg``'s handler and stop its task."""
        self._handlers.remove(reg)

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Run until cancelled: the Reflector, the processing loop and the handlers."""
        self._running = True
        try:
            async with asyncio.TaskGroup() as tg:
                self._handlers.start_all()
                tg.create_task(self.reflector.run(), name=f"{self.name}-reflector")
                tg.create_task(self._process(), name=f"{self.name}-process")
                if self.resync_period:
                    tg.create_task(
                        self._resync_loop(self.resync_period), name=f"{self.name}-resync"
                    )
                if isinstance(self.queue, coalescing.CoalescingQueue):
                    tg.create_task(self._coalesced_sync(), name=f"{self.name}-sync-watch")
        finally:
            self._running = False
            await self._handlers.stop_all()

    async def _process(self) -> None:
        queue = self.queue
        while True:
            await self._apply(await queue.get())
            # Then what is already queued, without waiting between items (bounded, so the loop
            # gets a turn now and then).
            for _ in range(1023):
                item = queue.get_nowait()
                if item is None:
                    break
                await self._apply(item)
            if not self.has_synced and isinstance(queue, coalescing.CoalescingQueue):
                await self._mark_synced_if(queue.has_synced)

    async def _coalesced_sync(self) -> None:
        """Coalescing mode: an empty first list pops nothing; notice the sync anyway."""
        await self.reflector.synced.wait()
        queue = self.queue
        while not self.has_synced:
            if isinstance(queue, coalescing.CoalescingQueue) and queue.has_synced:
                await self._mark_synced_if(True)
                return
            await asyncio.sleep(0.01)

    async def _mark_synced_if(self, condition: bool) -> None:
        if condition and not self.has_synced:
            self._handlers.mark_synced()
            self._synced.set()

    async def _apply(self, item: QueueItem | coalescing.Deltas) -> None:
        if isinstance(item, coalescing.Deltas):
            await self._apply_coalesced(item)
        elif isinstance(item, Delta):
            await self._apply_delta(item)
        elif isinstance(item, Replaced):
            await self._apply_replaced(item)
        elif isinstance(item, Confirmed):
            if self.state is CacheState.RESTORED:
                self.state = CacheState.CONFIRMED
                await self._mark_synced_if(True)
        elif isinstance(item, Bookmark):
            self.store.advance(item.rv)
            self.event_log.advance(item.rv)
            for listener in self._bookmark_listeners:
                listener(item.rv)
        else:  # pragma: no cover - other queue modes deliver their own items
            raise TypeError(f"unexpected queue item {item!r}")

    async def _apply_delta(self, delta: Delta) -> None:
        store = self.store
        self.events_processed += 1
        self.last_event_at = self._clock()
        entry = self._entry(delta.object)
        if delta.type == "DELETED":
            prev = store.delete(entry.key, rv=delta.rv)
            event = self.event_log.append("DELETED", entry, prev, delta.rv)
            self._emit(event)
            await self._handlers.notify(("delete", entry, None))
            return
        prev = store.put(entry, rv=delta.rv)
        event_type = "ADDED" if prev is None else "MODIFIED"
        event = self.event_log.append(event_type, entry, prev, delta.rv)
        self._emit(event)
        if prev is None:
            await self._handlers.notify(("add", entry, False))
        else:
            await self._handlers.notify(("update", prev, entry))

    async def _apply_replaced(self, item: Replaced) -> None:
        if isinstance(item, Restored) and not self.serve_stale:
            await (self._apply_after or self.watch_answered)()
            # A turn first for what the last answer scheduled: its confirmation's timer starts
            # now, not once the loop is free again.
            await asyncio.sleep(0)
        store = self.store
        first = not self.has_synced
        entries = [self._entry(o) for o in item.objects]
        before = store.resource_version
        old = store.replace(entries, item.rv)
        self.event_log.reset(item.rv)
        self.relists += 1
        changed: list[tuple[Entry, Entry | None]] = []
        for entry in entries:
            prev = old.pop(entry.key, None)
            if prev is None or not prev.same_object(entry):
                changed.append((entry, prev))
        if not first and self._difference_listeners:
            difference = RelistDifference(item.rv, before, changed, old)
            for on_difference in self._difference_listeners:
                on_difference(difference)
        for listener in self._relist_listeners:
            listener(item.rv)
        for entry, prev in changed:
            if prev is None:
                await self._handlers.notify(("add", entry, first))
            else:
                await self._handlers.notify(("update", prev, entry))
        for key, gone in old.items():
            await self._handlers.notify(("delete", DeletedFinalStateUnknown(key, gone), None))
        if isinstance(item, Restored):
            self.state = CacheState.RESTORED
            await self._mark_synced_if(self.serve_stale)
        else:
            self.state = CacheState.SYNCED
            await self._mark_synced_if(first)
        if first and self.freeze_gc_after_sync:
            gc.collect()
            gc.freeze()

    async def watch_answered(self) -> None:
        """Until the first watch got its answer (its stream or an error), at most the
        confirmation's moment: when a restored state is applied (:meth:`restore`)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RESUME_CONFIRMATION):
                await self.reflector.watch_answered.wait()

    async def _apply_coalesced(self, item: coalescing.Deltas) -> None:
        """Coalescing mode: apply each recorded delta of one key (client-go's processDeltas)."""
        store = self.store
        for delta in item.deltas:
            self.events_processed += 1
            obj = delta.object
            if delta.type == "Deleted":
                if isinstance(obj, DeletedFinalStateUnknown):
                    prev = store.delete(obj.key)
                    last = prev or (store.make_entry(_copy(obj.object)) if obj.object else None)
                    if last is not None:
                        await self._handlers.notify(
                            ("delete", DeletedFinalStateUnknown(obj.key, last), None)
                        )
                    continue
                entry = store.make_entry(_copy(obj))
                store.delete(entry.key)
                await self._handlers.notify(("delete", entry, None))
                continue
            assert not isinstance(obj, DeletedFinalStateUnknown)
            entry = store.make_entry(_copy(obj))
            prev = store.put(entry, rv=max(store.resource_version, delta.rv))
            if prev is None:
                await self._handlers.notify(("add", entry, item.in_initial_list))
            else:
                await self._handlers.notify(("update", prev, entry))

    def _entry(self, obj: Any) -> Entry:
        """An object as the store keeps it (the Reflector's decode made most already)."""
        return obj if isinstance(obj, Entry) else self.store.make_entry(obj)

    def _emit(self, event: LogEvent) -> None:
        for listener in self._listeners:
            listener(event)

    async def _resync_loop(self, period: float) -> None:
        """client-go's resync: every period, an update (old = new) for every object (in
        coalescing mode, a Sync delta for every key with nothing pending)."""
        while True:
            await self._sleep(period)
            if isinstance(self.queue, coalescing.CoalescingQueue):
                self.queue.resync()
                continue
            for entry in list(self.store.entries()):
                await self._handlers.notify(("update", entry, entry))


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


def _subscribe(listeners: list[_L], listener: _L) -> Callable[[], None]:
    """Add ``listener`` to ``listeners``; the function returned removes it."""
    listeners.append(listener)
    return lambda: listeners.remove(listener)
