"""SharedInformer: one Reflector, one Store, one EventLog, any number of subscribers and handlers.

The flow is one-way: the Reflector puts what upstream said on the EventQueue (objects already in
their stored form: the informer gives it ``Store.make_entry`` as its decode, so a large list is
never held parsed); the processing loop takes the items in order and, for each, synchronously
applies it to the Store (which moves its RV with it), then publishes what happened as one typed
event (:mod:`.events`: ``Changed``, ``Relisted``, ``Progressed``, ``Synced``) to every
*subscriber* — inline, in order: the EventLog is the first, then consumers such as the daemon's
watch fan-out that must see every event and never block — and to the *handlers*.

Handlers (:mod:`.handlers`: ``on_add(entry, in_initial_list)``, ``on_update(old, new)``,
``on_delete(entry or tombstone)``) run in their own task with their own bounded buffer, so a slow
handler delays only itself — unless its overflow policy is ``BLOCK``, which makes the informer
wait for it (the default for library users: nothing is lost). Handlers receive :class:`Entry`
objects: the bytes the store keeps, parsed only when the handler calls ``entry.object()``.

Guarantees: per informer, subscribers and handlers see events in RV order; after a relist they
see the difference between the old and new state (a :class:`~.events.Relisted`; handlers get
adds, updates, and deletes carrying the last known object as a :class:`DeletedFinalStateUnknown`
tombstone).

A warm restart (:meth:`SharedInformer.restore`, before :meth:`~SharedInformer.run`) starts from a
state read from disk: it is applied as the first sync is, and the informer counts as synced only
once upstream confirmed it (:class:`CacheState`), unless ``serve_stale`` says to serve it at once.
A relist instead (upstream no longer has its RV) delivers its difference as any relist does.

For handlers that want only the latest state of each object, batched per key, there is
:class:`~cacheproxy.informer.coalescing.CoalescingInformer` (client-go's classic ``DeltaFIFO``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

from cacheproxy.informer.eventlog import EventLog
from cacheproxy.informer.events import Changed, InformerEvent, Progressed, Relisted, Synced
from cacheproxy.informer.handlers import (
    HandlerRegistration,
    Handlers,
    Overflow,
    ResourceEventHandler,
)
from cacheproxy.informer.instruments import InformerMetrics
from cacheproxy.informer.listwatch import ListerWatcher
from cacheproxy.informer.queue import (
    Bookmark,
    DeletedFinalStateUnknown,
    Delta,
    EventQueue,
    InOrderQueue,
    QueueItem,
    Replaced,
)
from cacheproxy.informer.reflector import (
    RESUME_CONFIRMATION,
    Confirmed,
    Reflector,
    ReflectorOptions,
    Restored,
)
from cacheproxy.informer.store import Entry, Store

__all__ = ["CacheState", "DeletedFinalStateUnknown", "SharedInformer"]


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


class SharedInformer:
    """Keeps ``store`` equal to one upstream collection and tells subscribers and handlers what
    changed."""

    def __init__(
        self,
        lw: ListerWatcher,
        *,
        name: str,
        store: Store,
        event_log: EventLog | None = None,
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
        self.queue: EventQueue[Any] = self._make_queue(queue_size)
        self.reflector = Reflector(
            lw,
            self.queue,
            name=name,
            options=reflector_options,
            clock=clock,
            sleep=sleep,
            metrics=metrics,
            decode=self._decode(),
        )
        self.resync_period = resync_period
        self._sleep = sleep
        self._handlers = Handlers(name)
        self._subscribers: list[Callable[[InformerEvent], None]] = []
        self._synced = asyncio.Event()
        self._running = False
        self.relists = 0
        self.state = CacheState.SYNCING
        self.serve_stale = False
        """A restored state counts as synced (is served) before upstream confirmed it."""
        self._apply_after: Callable[[], Awaitable[object]] | None = None
        self.events_processed = 0
        self.last_event_at: float | None = None
        self._clock = clock
        self._log_events()

    def _make_queue(self, size: int) -> EventQueue[Any]:
        """Every event in order (see the module)."""
        return InOrderQueue(size)

    def _decode(self) -> Callable[[dict[str, Any]], Any] | None:
        # In order, objects become entries as they are read (parsed dicts die young, and a large
        # list is never held parsed: docs/design.md §6).
        return self.store.make_entry

    def _log_events(self) -> None:
        """The EventLog is the first subscriber: a later one reading it finds the event there."""
        self.subscribe(self.event_log.record)

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
        self.serve_stale = serve_stale
        self._apply_after = apply_after
        self.reflector.resume(Restored(entries, rv))

    # ------------------------------------------------------------------ consumers

    def subscribe(self, subscriber: Callable[[InformerEvent], None]) -> Callable[[], None]:
        """Call ``subscriber`` with every event (:mod:`.events`), in order, inline in the
        processing loop: it must be fast, never block and never raise. Returns a function that
        removes it."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

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

    def _publish(self, event: InformerEvent) -> None:
        for subscriber in self._subscribers:
            subscriber(event)

    async def _tell(self, event: InformerEvent) -> None:
        """``event`` to the subscribers, then to the handlers."""
        self._publish(event)
        await self._handlers.publish(event)

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

    async def _synced_now(self) -> None:
        if not self.has_synced:
            self._synced.set()
            await self._tell(Synced(self.store.resource_version))

    async def _apply(self, item: QueueItem) -> None:
        match item:
            case Delta():
                await self._apply_delta(item)
            case Replaced():
                await self._apply_replaced(item)
            case Confirmed():
                if self.state is CacheState.RESTORED:
                    self.state = CacheState.CONFIRMED
                    await self._synced_now()
            case Bookmark(rv=rv):
                self.store.advance(rv)
                self._publish(Progressed(rv))
            case _:  # pragma: no cover - the Reflector puts nothing else
                raise TypeError(f"unexpected queue item {item!r}")

    async def _apply_delta(self, delta: Delta) -> None:
        store = self.store
        self.events_processed += 1
        self.last_event_at = now = self._clock()
        entry = self._entry(delta.object)
        if delta.type == "DELETED":
            prev = store.delete(entry.key, rv=delta.rv)
            await self._tell(Changed(delta.rv, "DELETED", entry, prev, now))
            return
        prev = store.put(entry, rv=delta.rv)
        await self._tell(
            Changed(delta.rv, "ADDED" if prev is None else "MODIFIED", entry, prev, now)
        )

    async def _apply_replaced(self, item: Replaced) -> None:
        restored = isinstance(item, Restored)
        if restored and not self.serve_stale:
            await (self._apply_after or self.watch_answered)()
            # A turn first for what the last answer scheduled: its confirmation's timer starts
            # now, not once the loop is free again.
            await asyncio.sleep(0)
        store = self.store
        first = not self.has_synced
        entries = [self._entry(o) for o in item.objects]
        before = store.resource_version
        old = store.replace(entries, item.rv)
        self.relists += 1
        changed: list[tuple[Entry, Entry | None]]
        if not old:  # nothing held before (the first sync): everything is new
            changed = [(entry, None) for entry in entries]
        else:
            changed = []
            for entry in entries:
                prev = old.pop(entry.key, None)
                if prev is None or not prev.same_object(entry):
                    changed.append((entry, prev))
        await self._tell(Relisted(item.rv, before, changed, old, first=first, restored=restored))
        if restored:
            self.state = CacheState.RESTORED
            if self.serve_stale:
                await self._synced_now()
        else:
            self.state = CacheState.SYNCED
            await self._synced_now()
        if first and self.freeze_gc_after_sync:
            gc.collect()
            gc.freeze()

    async def watch_answered(self) -> None:
        """Until the first watch got its answer (its stream or an error), at most the
        confirmation's moment: when a restored state is applied (:meth:`restore`)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RESUME_CONFIRMATION):
                await self.reflector.watch_answered.wait()

    def _entry(self, obj: Any) -> Entry:
        """An object as the store keeps it (the Reflector's decode made most already)."""
        return obj if isinstance(obj, Entry) else self.store.make_entry(obj)

    async def _resync_loop(self, period: float) -> None:
        """client-go's resync: every period, an update (old = new) for every object."""
        while True:
            await self._sleep(period)
            await self._resync()

    async def _resync(self) -> None:
        for entry in list(self.store.entries()):
            await self._handlers.notify(("update", entry, entry))
