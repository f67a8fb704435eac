"""Watches served from the cache: the WatchHub fans every informer event out to watchers.

- Each event's line bytes are built once and shared by every watcher that gets it (DESIGN §3).
- Every watcher has a bounded buffer; one that falls behind is closed (and counted), so the
  informer and the other watchers never wait for it.
- Selectors follow the transition rule: an object that stops matching is sent as DELETED (its old
  state, at the event's RV), one that starts matching as ADDED.
- Watchers survive an upstream relist (the API server closes them all when its watch cache
  reinitialises): the informer hands over the difference between the old and the new state as
  events (one per RV, ascending; see ``SharedInformer._emit_relist_difference``), and watchers
  that asked for bookmarks get one at the relist's RV. So a relist upstream costs connected
  clients no relist.
- Bookmarks (only when asked) about every ``bookmark_interval`` and ~2 s before the deadline.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import orjson

from cacheproxy.informer.eventlog import LogEvent
from cacheproxy.informer.store import Entry, Store
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.watchevents import bookmark_line, event_line
from cacheproxy.server.query import EntryView, Query, matches_view
from cacheproxy.serving import Mailbox, live_lines

__all__ = ["ServedWatch", "WatchHub", "WatchPlan", "stream"]

INITIAL_PIECE_BYTES = 128 << 10
_ADDED_HEAD = b'{"type":"ADDED","object":'
_EVENT_TAIL = b"}\n"
_EVENT_HEADS = {
    kind: b'{"type":"%s","object":' % kind for kind in (b"ADDED", b"MODIFIED", b"DELETED")
}


def _restamped(entry: Entry, rv: int) -> bytes:
    """``entry`` with ``metadata.resourceVersion`` set to ``rv`` (an object that stopped
    matching is reported as deleted at the RV of the event that moved it out)."""
    obj = entry.object()
    obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
    return orjson.dumps(obj)


class _Lines:
    """The line bytes of one event, built on first use and shared by all watchers."""

    __slots__ = ("_cache", "event")

    def __init__(self, event: LogEvent) -> None:
        self.event = event
        self._cache: dict[bytes, bytes] = {}

    def line(self, kind: bytes) -> bytes:
        line = self._cache.get(kind)
        if line is None:
            event = self.event
            if kind == b"GONE":  # stopped matching: the old object at this event's RV
                assert event.prev is not None
                line = event_line("DELETED", _restamped(event.prev, event.rv))
            else:
                entry = event.entry
                line = b"".join((_EVENT_HEADS[kind], entry.prefix, entry.body, _EVENT_TAIL))
            self._cache[kind] = line
        return line


class ServedWatch(Mailbox[bytes]):
    """One client's watch: its query and a bounded mailbox of event lines."""

    def __init__(
        self, query: Query, *, buffer: int, min_rv: int = 0, bookmarks: bool = False
    ) -> None:
        super().__init__(buffer)
        self.query = query
        self.bookmarks = bookmarks
        """The client asked for bookmarks (``allowWatchBookmarks``)."""
        self.min_rv = min_rv
        self.last_rv = min_rv

    def offer(self, line: bytes, rv: int) -> bool:
        """Queue a line; False (and closed) when the buffer is full."""
        if not self.put(line):
            return False
        self.last_rv = rv
        return True

    def take(self) -> list[bytes]:
        return self.drain()


class WatchHub:
    """Every open watch of one resource, fed synchronously by the informer's listener."""

    def __init__(self, rtype: ResourceType, store: Store) -> None:
        self.rtype = rtype
        self.store = store
        self.watchers: set[ServedWatch] = set()
        self.evicted = 0
        self.delivered = 0

    def on_event(self, event: LogEvent) -> None:
        if not self.watchers:
            return
        lines = _Lines(event)
        rtype, store = self.rtype, self.store
        # One view of each state per event, shared by every watcher: labels and parsed fields
        # are worked out at most once, however many watchers look.
        new_view = EntryView(event.entry, rtype, store)
        old_view = EntryView(event.prev, rtype, store) if event.prev is not None else None
        for watcher in list(self.watchers):
            if watcher.closed:  # its client went away or its deadline passed: not an eviction
                self.watchers.discard(watcher)
                continue
            if event.rv <= watcher.min_rv:
                continue
            query = watcher.query
            new_ok = event.type != "DELETED" and matches_view(new_view, query)
            old_ok = old_view is not None and matches_view(old_view, query)
            if event.type == "DELETED":
                kind = b"DELETED" if old_ok else None
            elif new_ok:
                kind = b"MODIFIED" if old_ok else b"ADDED"
            else:
                kind = b"GONE" if old_ok else None
            if kind is None:
                continue
            if watcher.offer(lines.line(kind), event.rv):
                self.delivered += 1
            else:
                self.evicted += 1
                self.watchers.discard(watcher)

    def on_relist(self, rv: int) -> None:
        """After the relist's difference was delivered: a bookmark at its RV, for those who
        asked (their next resume starts there; older RVs are 410 now)."""
        if not self.watchers:
            return
        line = bookmark_line(self.rtype, rv)
        for watcher in list(self.watchers):
            if watcher.closed:
                self.watchers.discard(watcher)
            elif watcher.bookmarks and not watcher.offer(line, rv):
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


@dataclass(slots=True)
class WatchPlan:
    initial: Sequence[Entry]
    replay: Sequence[bytes]
    end_bookmark_rv: int | None
    allow_bookmarks: bool
    timeout: float
    bookmark_interval: float


async def stream(
    watcher: ServedWatch,
    plan: WatchPlan,
    rtype: ResourceType,
    *,
    current_rv: Callable[[], int],
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[list[bytes]]:
    """One watch response until its deadline or until the watcher is closed, in batches: the
    bytes of each batch are written one after the other (whole lines; never joined here)."""
    deadline = clock() + plan.timeout
    # The initial state goes out like a list: the stored bytes between the line's two halves,
    # in batches of ~128 KiB (a thousand watchers starting at once hold a batch each, not the
    # cache each: the next one waits until the client took the last).
    batch: list[bytes] = []
    size = 0
    for entry in plan.initial:
        body = entry.body
        batch += (_ADDED_HEAD, entry.prefix, body, _EVENT_TAIL)
        size += len(body)
        if size >= INITIAL_PIECE_BYTES:
            yield batch
            batch = []
            size = 0
    batch.extend(plan.replay)
    if plan.end_bookmark_rv is not None:
        batch.append(bookmark_line(rtype, plan.end_bookmark_rv, initial_events_end=True))
    if batch:
        yield batch

    def bookmark() -> bytes | None:
        # As the API server's watch cache: only a bookmark newer than where the watch started
        # (on a quiet resource, none at all), never one behind an event it was sent.
        rv = max(current_rv(), watcher.last_rv)
        return bookmark_line(rtype, rv) if rv > watcher.min_rv else None

    async for lines in live_lines(
        watcher,
        deadline=deadline,
        bookmark=bookmark if plan.allow_bookmarks else None,
        bookmark_interval=plan.bookmark_interval,
        clock=clock,
    ):
        yield lines
