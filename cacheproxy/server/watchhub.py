"""The WatchHub: every open watch of one resource, fed synchronously by its informer.

- Each event's line bytes are built once and shared by every watcher that gets it (docs/design.md §3);
  what each watcher gets is :func:`~.watchfilter.watcher_sees`'s decision (the transition rule).
- Every watcher has a bounded buffer; one that falls behind is closed (and counted), so the
  informer and the other watchers never wait for it (docs/design.md §7).
- Only events newer than a watcher's starting point reach it.
- Watchers survive an upstream relist (the API server closes them all when its watch cache
  reinitialises): the relist's difference is delivered as events (:func:`~.watchfilter.
  relist_events`), then those that asked for bookmarks get one at the relist's RV. So a relist
  upstream costs connected clients no relist.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cacheproxy.informer.events import Changed, InformerEvent, Relisted
from cacheproxy.informer.store import Store
from cacheproxy.kube.partial import Reform
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.watchevents import bookmark_line
from cacheproxy.server.query import EntryView, Query
from cacheproxy.server.watchfilter import EventLines, relist_events, watcher_sees
from cacheproxy.serving import Mailbox

__all__ = ["ServedWatch", "WatchHub"]


class ServedWatch(Mailbox[bytes]):
    """One client's watch: its query and a bounded mailbox of event lines."""

    def __init__(
        self,
        query: Query,
        *,
        buffer: int,
        min_rv: int = 0,
        bookmarks: bool = False,
        reform: Reform | None = None,
    ) -> None:
        super().__init__(buffer)
        self.query = query
        self.bookmarks = bookmarks
        """The client asked for bookmarks (``allowWatchBookmarks``)."""
        self.reform = reform
        """How its objects are re-encoded (metadata only, managedFields dropped); None: as
        stored."""
        self.min_rv = min_rv
        """Events at or before this RV are not sent (the watch started after them)."""
        self.last_rv = min_rv
        """The RV of the last line queued."""

    def offer(self, line: bytes, rv: int) -> bool:
        """Queue a line; False (and closed) when the buffer is full."""
        if not self.put(line):
            return False
        self.last_rv = rv
        return True

    def take(self) -> list[bytes]:
        return self.drain()


class WatchHub:
    """Every open watch of one resource, fed synchronously as its informer's subscriber
    (:meth:`observe`)."""

    def __init__(
        self, rtype: ResourceType, store: Store, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rtype = rtype
        self.store = store
        self.watchers: set[ServedWatch] = set()
        self.evicted = 0
        self.delivered = 0
        self._clock = clock

    def on_event(self, event: Changed) -> None:
        """An event of the informer (or of a relist's difference): to every watcher it
        concerns."""
        if not self.watchers:
            return
        lines = EventLines(event)
        rtype, store = self.rtype, self.store
        # One view of each state per event, shared by every watcher: labels and parsed fields
        # are worked out at most once, however many watchers look.
        new = EntryView(event.entry, rtype, store)
        old = EntryView(event.prev, rtype, store) if event.prev is not None else None
        rv = event.rv
        for watcher in list(self.watchers):
            if watcher.closed:  # its client went away or its deadline passed: not an eviction
                self.watchers.discard(watcher)
                continue
            if rv <= watcher.min_rv:
                continue
            kind = watcher_sees(event, watcher.query, new, old)
            if kind is None:
                continue
            if watcher.offer(lines.line(kind, watcher.reform), rv):
                self.delivered += 1
            else:
                self.evicted += 1
                self.watchers.discard(watcher)

    def observe(self, event: InformerEvent) -> None:
        """Its informer's subscriber: each change, and what a relist changed (not the first
        state: no watcher was served before it)."""
        match event:
            case Changed():
                self.on_event(event)
            case Relisted(first=False):
                self.on_relist(event)

    def on_relist(self, difference: Relisted) -> None:
        """What an upstream relist changed, as events, then a bookmark at its RV for those who
        asked (their next resume starts there; older RVs are 410 now)."""
        if not self.watchers:
            return
        events = relist_events(
            difference,
            make_entry=self.store.make_entry,
            now=self._clock(),
            name=self.rtype.config_name,
        )
        for event in events:
            self.on_event(event)
        rv = difference.rv
        lines: dict[str | None, bytes] = {}
        for watcher in list(self.watchers):
            if watcher.closed:
                self.watchers.discard(watcher)
                continue
            if not watcher.bookmarks:
                continue
            metadata = watcher.reform.metadata if watcher.reform is not None else None
            line = lines.get(metadata)
            if line is None:
                line = lines[metadata] = bookmark_line(self.rtype, rv, metadata=metadata)
            if not watcher.offer(line, rv):
                self.evicted += 1
                self.watchers.discard(watcher)

    def evict(self, watcher: ServedWatch, reason: str) -> None:
        """Drop a watcher whose client does not keep up (counted; a closed one is not)."""
        if not watcher.closed:
            watcher.close(f"too slow: {reason}")
            self.evicted += 1
        self.watchers.discard(watcher)

    def add(self, watcher: ServedWatch) -> None:
        self.watchers.add(watcher)

    def remove(self, watcher: ServedWatch) -> None:
        self.watchers.discard(watcher)

    def close_all(self, reason: str) -> None:
        """End every watch (their clients see the stream end)."""
        for watcher in list(self.watchers):
            watcher.close(reason)
        self.watchers.clear()
