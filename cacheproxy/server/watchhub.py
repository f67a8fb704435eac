"""The WatchHub: every open watch of one resource, fed synchronously by its informer.

- Each event's line bytes are built once and shared by every watcher that gets it (docs/design.md §3);
  what each watcher gets is :func:`~.watchfilter.watcher_sees`'s decision (the transition rule).
- Every watcher has a buffer bounded in events and in bytes, and the bytes queued for all
  watchers of the daemon are bounded together, each shared line counted once
  (:class:`QueuedBytes`: over it, the watchers with the most queued are evicted). One that
  falls behind is closed and counted by reason
  (:data:`EVICTION_REASONS`), so the informer and the other watchers never wait for it
  (docs/design.md §7). A watcher evicted for bytes loses what was queued for it at once (that
  memory is what the bound is for); its client sees its stream end as for any eviction, after
  a prefix of its events, and resumes from the last RV it got.
- Only events newer than a watcher's starting point reach it.
- Fan-out by index, as the API server's cacher with its ``indexedTriggers``: a watcher whose
  query pins one value of an indexed attribute — its namespace, a field selector ``path=value``
  on a configured index path, a label ``key=value`` — is kept under that (attribute, value), and
  an event is offered only to the watchers under the values of its new and its previous state
  (an object that moved from one value to another reaches the watchers of both, each as
  :func:`~.watchfilter.watcher_sees` decides), plus the watchers with no such value. What each
  watcher gets is exactly what offering every event to every watcher gives; an event costs its
  candidates, not every watcher.
- Watchers survive an upstream relist (the API server closes them all when its watch cache
  reinitialises): the relist's difference is delivered as events (:func:`~.watchfilter.
  relist_events`), then those that asked for bookmarks get one at the relist's RV. So a relist
  upstream costs connected clients no relist.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Final

from cacheproxy.informer.events import Changed, InformerEvent, Relisted
from cacheproxy.informer.store import Store
from cacheproxy.kube.labels import Operator
from cacheproxy.kube.partial import Reform
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.versions import NEWEST, KubeVersion
from cacheproxy.kube.watchevents import bookmark_line
from cacheproxy.server.query import EntryView, Query
from cacheproxy.server.watchfilter import EventLines, SharedLine, relist_events, watcher_sees
from cacheproxy.serving import TOO_SLOW, Mailbox

__all__ = ["EVICTION_REASONS", "QueuedBytes", "ServedWatch", "WatchHub"]

EVICTION_REASONS: Final = ("events", "bytes", "total_bytes", "stall")
"""Why a watcher was evicted: its buffer held ``server.limits.watchBuffer`` events, or
``watchBufferBytes`` bytes; the distinct lines queued for all watchers passed
``watchBuffersTotalBytes`` and it had the most queued; its client took nothing for
``watchStallSeconds``."""

_DISCARDED: Final = frozenset(("bytes", "total_bytes"))
"""Evictions that drop what was queued for the watcher at once."""


class QueuedBytes:
    """The bytes queued for every watcher of a daemon (all its resources' hubs share one), and
    their bound: :meth:`WatchHub.on_event` evicts the watchers with the most queued while the
    total is over ``limit``.

    A line counts once, however many queues hold it, from the first queue that takes it until
    the last one lets it go (sent, or dropped when its watcher is evicted or its watch ends):
    an event's line is built once and shared by every watcher it is for (:class:`SharedLine`),
    so that is the memory the queues pin. Which watcher goes is chosen by its own queue counted
    in full (``queued_bytes``): evicting it frees its lines that no other queue holds."""

    __slots__ = ("hubs", "limit", "total")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        """None: unbounded."""
        self.total = 0
        """The sizes of the distinct lines queued now."""
        self.hubs: dict[ServedWatch, WatchHub] = {}
        """Every registered watcher, and its hub."""

    def over(self) -> bool:
        return self.limit is not None and self.total > self.limit

    def release(self, lines: Iterable[SharedLine]) -> list[bytes]:
        """``lines`` each left a queue (sent or dropped): those no queue holds any more no longer
        count. Their bytes, in order."""
        freed = 0
        data = []
        for line in lines:
            line.holders -= 1
            if not line.holders:
                freed += line.size
            data.append(line.data)
        self.total -= freed
        return data

    def shed(self) -> None:
        """Evict the watchers with the most queued, the largest first, until the total is within
        the limit. Lines shared with other queues stay until their last holder goes, so it may
        take more than one."""
        if not self.over():
            return
        for watcher in sorted(self.hubs, key=lambda w: w.queued_bytes, reverse=True):
            if not watcher.queued_bytes:  # what is left is queued for watchers already gone
                return
            self.hubs[watcher].evict(watcher, "total_bytes")
            if not self.over():
                return


Attribute = tuple[str, str]
"""What the fan-out indexes watchers by: ``("namespace", "")``, ``("field", path)`` (a configured
index path) or ``("label", key)``."""

_NAMESPACE: Final = ("namespace", "")
_EQUALITY: Final = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)


def fanout_key(query: Query, store: Store) -> tuple[Attribute, str] | None:
    """The (attribute, value) every object a watcher with ``query`` sees holds — before or after
    a change — or None when its query pins none (it is offered every event). A configured
    index path's value is any of the values the index holds (a multi-valued path)."""
    for freq in query.fields.requirements:
        if freq.operator == "=" and freq.value and store.has_index(freq.field):
            return ("field", freq.field), freq.value
    for req in query.labels.requirements:
        if req.operator in _EQUALITY and len(req.values) == 1:
            return ("label", req.key), req.values[0]
    if query.namespace:
        return _NAMESPACE, query.namespace
    for freq in query.fields.requirements:
        if freq.operator == "=" and freq.field == "metadata.namespace" and freq.value:
            return _NAMESPACE, freq.value
    return None


def _values(view: EntryView, attribute: Attribute) -> tuple[str, ...]:
    """``attribute``'s values in one state of an object (none when it has none)."""
    kind, name = attribute
    if kind == "field":
        return view.index_values(name)
    if kind == "label":
        value = view.labels.get(name)
        return () if value is None else (value,)
    return (view.entry.namespace,)


class ServedWatch(Mailbox[SharedLine]):
    """One client's watch: its query and a bounded mailbox of event lines (shared with the other
    watchers they are for; :meth:`take` hands out their bytes)."""

    def __init__(
        self,
        query: Query,
        *,
        buffer: int,
        max_bytes: int | None = None,
        min_rv: int = 0,
        bookmarks: bool = False,
        reform: Reform | None = None,
    ) -> None:
        super().__init__(buffer, max_bytes=max_bytes)
        self.budget = QueuedBytes()
        """The daemon's total it counts in (its hub's, once added)."""
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
        self.fanout_key: tuple[Attribute, str] | None = None
        """Where its hub keeps it (:func:`fanout_key`; None: offered every event)."""

    def offer(self, line: SharedLine, rv: int) -> bool:
        """Queue a line; False (and closed, :attr:`overflow` saying why) when the buffer is
        full."""
        size = line.size
        if not self.put(line, size):
            return False
        self.last_rv = rv
        line.holders += 1
        if line.holders == 1:  # the first queue to hold it: its bytes are pinned from now
            self.budget.total += size
        return True

    def take(self) -> list[bytes]:
        """The lines queued, in order (the queue is empty after)."""
        lines = self.drain()
        return self.budget.release(lines) if lines else []

    def discard(self) -> list[SharedLine]:
        lines = super().discard()
        self.budget.release(lines)
        return lines


class WatchHub:
    """Every open watch of one resource, fed synchronously as its informer's subscriber
    (:meth:`observe`)."""

    def __init__(
        self,
        rtype: ResourceType,
        store: Store,
        *,
        budget: QueuedBytes | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rtype = rtype
        self.store = store
        self.kube_version: Callable[[], KubeVersion] = lambda: NEWEST
        """The upstream's version (its bookmarks' shape); the server sets it."""
        self.budget = budget if budget is not None else QueuedBytes()
        """The lines queued for all the daemon's watchers (shared between its hubs)."""
        self.watchers: set[ServedWatch] = set()
        """Every open watch."""
        self._unkeyed: set[ServedWatch] = set()
        """The watchers offered every event (their queries pin no indexed value)."""
        self._keyed: dict[Attribute, dict[str, set[ServedWatch]]] = {}
        """The others, by attribute and value."""
        self.indexed = True
        """Offer each event only to its candidates (False: to every watcher, one by one; kept to
        compare the two)."""
        self.evictions: dict[str, int] = dict.fromkeys(EVICTION_REASONS, 0)
        """Watchers evicted, by reason."""
        self.delivered = 0
        self._clock = clock

    @property
    def evicted(self) -> int:
        """Watchers evicted, whatever the reason."""
        return sum(self.evictions.values())

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
        budget = self.budget
        for watcher in self._candidates(new, old) if self.indexed else list(self.watchers):
            if watcher.closed:  # its client went away, or it was evicted by another's event
                self._drop(watcher)
                continue
            if rv <= watcher.min_rv:
                continue
            kind = watcher_sees(event, watcher.query, new, old)
            if kind is None:
                continue
            if watcher.offer(lines.line(kind, watcher.reform), rv):
                self.delivered += 1
                if budget.limit is not None and budget.total > budget.limit:
                    budget.shed()
            else:
                self._overflowed(watcher)

    def _candidates(self, new: EntryView, old: EntryView | None) -> list[ServedWatch]:
        """The watchers an event with these states may concern: those under the values of its
        new and previous state, and those offered every event."""
        candidates = list(self._unkeyed)
        for attribute, by_value in self._keyed.items():
            values = _values(new, attribute)
            if old is not None:
                before = _values(old, attribute)
                if before != values:
                    values = tuple(dict.fromkeys((*values, *before)))
            for value in values:
                watchers = by_value.get(value)
                if watchers:
                    candidates.extend(watchers)
        return candidates

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
        lines: dict[str | None, SharedLine] = {}
        for watcher in list(self.watchers):
            if watcher.closed:
                self._drop(watcher)
                continue
            if not watcher.bookmarks:
                continue
            metadata = watcher.reform.metadata if watcher.reform is not None else None
            line = lines.get(metadata)
            if line is None:
                line = lines[metadata] = SharedLine(
                    bookmark_line(
                        self.rtype,
                        rv,
                        metadata=metadata,
                        zero_time=self.kube_version().writes_zero_times,
                    )
                )
            if watcher.offer(line, rv):
                if self.budget.over():
                    self.budget.shed()
            else:
                self._overflowed(watcher)

    def _overflowed(self, watcher: ServedWatch) -> None:
        """``watcher`` refused a line: evicted, counted by the bound it hit (not when it was
        closed already)."""
        reason = watcher.overflow
        if reason is not None:
            self.evictions[reason] += 1
            if reason in _DISCARDED:
                watcher.discard()
        self._drop(watcher)

    def evict(self, watcher: ServedWatch, reason: str, detail: str = "") -> None:
        """Drop a watcher whose client does not keep up, for ``reason`` (one of
        :data:`EVICTION_REASONS`; counted, unless it was closed already). ``detail`` goes in its
        close reason."""
        if not watcher.closed:
            watcher.close(f"{TOO_SLOW}: {detail or reason}")
            self.evictions[reason] += 1
            if reason in _DISCARDED:
                watcher.discard()
        self._drop(watcher)

    def _drop(self, watcher: ServedWatch) -> None:
        self.watchers.discard(watcher)
        self.budget.hubs.pop(watcher, None)
        key = watcher.fanout_key
        if key is None:
            self._unkeyed.discard(watcher)
            return
        attribute, value = key
        by_value = self._keyed.get(attribute)
        if by_value is not None and value in by_value:
            by_value[value].discard(watcher)
            if not by_value[value]:
                del by_value[value]
                if not by_value:
                    del self._keyed[attribute]

    def add(self, watcher: ServedWatch) -> None:
        self.watchers.add(watcher)
        watcher.budget = self.budget
        self.budget.hubs[watcher] = self
        key = watcher.fanout_key = fanout_key(watcher.query, self.store)
        if key is None:
            self._unkeyed.add(watcher)
        else:
            attribute, value = key
            self._keyed.setdefault(attribute, {}).setdefault(value, set()).add(watcher)

    def remove(self, watcher: ServedWatch) -> None:
        """``watcher``'s response ended: what is still queued for it is dropped."""
        self._drop(watcher)
        watcher.discard()

    def close_all(self, reason: str) -> None:
        """End every watch (their clients see the stream end)."""
        for watcher in list(self.watchers):
            watcher.close(reason)
            self.budget.hubs.pop(watcher, None)
        self.watchers.clear()
        self._unkeyed.clear()
        self._keyed.clear()
