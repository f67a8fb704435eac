"""Snapshots of one resource at older resourceVersions, kept for the pages of list walks.

A list at an RV the cache has moved past — the pages of a walk whose cache moved on after its
first page (the normal case under churn), or an ``Exact`` or ``limit`` list at an older RV — is cut
from the state at that RV: the Store with the EventLog's later events undone. That costs
O(n + events since), and what a query selects of it O(n) more; done again for every page, a walk
of n/limit pages cost O(n²/limit). Here the state at an RV is built once as a :class:`Snapshot`
(its entries in key order) and a query's part of it kept per (RV, query), so every later page of
the walk is a bisect and a slice: O(page + log n).

Bounds (docs/design.md §7: every buffer bounded): what is kept is dropped once unused for ``ttl``
seconds — the continue token TTL: a token is good for that long after the page that carried it —
and together it references at most ``max_entries`` entries, the least recently used dropped
first. A snapshot holds references to the store's immutable entries, not copies: it costs a list.

Consistency: a snapshot at N is what a rebuild at N gives for as long as the EventLog still
reaches N and no relist replaced the store (between relists the store changes only by logged
events). :meth:`SnapshotCache.view` is told the oldest RV the log reaches and drops what is older
(the rebuild then refuses, as before), and the owner calls :meth:`SnapshotCache.clear` on a
relist: a kept snapshot never answers what a rebuild would refuse or answer differently.
"""

from __future__ import annotations

import bisect
import heapq
import operator
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

from cacheproxy.informer.eventlog import EventLog
from cacheproxy.informer.store import Entry, Store

__all__ = ["Snapshot", "SnapshotCache", "build_snapshot"]

KEY = operator.attrgetter("key")
"""An entry's key: what a snapshot's entries are ordered by (``bisect(…, key=KEY)``)."""


class Snapshot:
    """A state at ``rv`` (or the part of it a query selects): its entries in key order.
    Immutable by contract, as the entries it holds."""

    __slots__ = ("entries", "rv")

    def __init__(self, rv: int, entries: list[Entry]) -> None:
        self.rv = rv
        self.entries = entries

    def __len__(self) -> int:
        return len(self.entries)

    def in_namespace(self, namespace: str) -> Snapshot:
        """The entries of ``namespace``: a range, as ``ns/`` sorts below any of its keys and
        ``ns0`` above them."""
        entries = self.entries
        low = bisect.bisect_left(entries, f"{namespace}/", key=KEY)
        high = bisect.bisect_left(entries, f"{namespace}0", lo=low, key=KEY)
        return Snapshot(self.rv, entries[low:high])

    def filtered(self, keep: Callable[[Entry], bool]) -> Snapshot:
        return Snapshot(self.rv, list(filter(keep, self.entries)))


def build_snapshot(store: Store, log: EventLog, rv: int) -> Snapshot:
    """The state at ``rv``: the store's entries with the later events undone (``TooOld`` when the
    log no longer reaches ``rv``). O(n + k log k) for k keys changed since: the store's keys come
    sorted, the entries of the k changed ones are sorted apart and merged in."""
    undo: dict[str, Entry | None] = {}
    for event in reversed(log.since(rv)):
        # Newest first: each key ends up with what it was before its oldest later event.
        undo[event.entry.key] = event.prev
    keys = store.sorted_keys()
    if not undo:
        return Snapshot(rv, store.get_many(keys))
    entries = store.get_many(key for key in keys if key not in undo)
    entries += sorted(filter(None, undo.values()), key=KEY)
    entries.sort(key=KEY)  # two sorted runs: one merge
    return Snapshot(rv, entries)


class _Kept:
    __slots__ = ("cost", "rv", "snapshot", "used")

    def __init__(self, snapshot: Snapshot, used: float) -> None:
        self.snapshot = snapshot
        self.rv = snapshot.rv
        self.cost = len(snapshot) + 1
        self.used = used


class SnapshotCache:
    """Snapshots by RV and their parts by (RV, query), bounded by age since last use and by the
    entries they reference (least recently used dropped first).

    Not thread-safe: one owner on the event loop. ``builds`` counts the snapshots built."""

    def __init__(
        self,
        *,
        ttl: float = 300.0,
        max_entries: int = 1_000_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._kept: OrderedDict[tuple[int, Hashable], _Kept] = OrderedDict()
        """Least recently used first."""
        self._by_rv: dict[int, set[tuple[int, Hashable]]] = {}
        self._rvs: list[int] = []
        """A heap of the RVs in ``_by_rv`` (and of some already gone: skipped when popped)."""
        self.entries = 0
        """Entries referenced by what is kept (a snapshot's and its parts' entries count apart)."""
        self.builds = 0

    def __len__(self) -> int:
        return len(self._kept)

    def view(
        self,
        rv: int,
        query: Hashable | None,
        *,
        oldest: int,
        build: Callable[[], Snapshot],
        select: Callable[[Snapshot], Snapshot],
        keep: bool,
    ) -> Snapshot:
        """What ``query`` selects of the state at ``rv`` (``query`` None: all of it), kept or
        made: ``build`` makes the state (raising when it cannot), ``select`` the part. ``oldest``
        is the oldest RV still buildable: anything kept older is dropped first. What is made is
        kept only when ``keep``."""
        now = self._clock()
        self._drop_expired(now)
        self._drop_older(oldest)
        if query is not None and (part := self._get((rv, query), now)) is not None:
            return part
        whole = self._get((rv, None), now)
        if whole is None:
            whole = build()
            self.builds += 1
            if keep:
                self._put((rv, None), whole, now)
        if query is None:
            return whole
        part = select(whole)
        if keep:
            self._put((rv, query), part, now)
        return part

    def clear(self) -> None:
        """Forget everything (the store was replaced: a relist)."""
        self._kept.clear()
        self._by_rv.clear()
        self._rvs.clear()
        self.entries = 0

    def _get(self, key: tuple[int, Hashable], now: float) -> Snapshot | None:
        kept = self._kept.get(key)
        if kept is None:
            return None
        kept.used = now
        self._kept.move_to_end(key)
        return kept.snapshot

    def _put(self, key: tuple[int, Hashable], snapshot: Snapshot, now: float) -> None:
        if key in self._kept:
            self._drop(key)
        kept = _Kept(snapshot, now)
        if kept.cost > self.max_entries:
            return  # larger than the whole budget: served once, not kept
        while self._kept and self.entries + kept.cost > self.max_entries:
            self._drop(next(iter(self._kept)))
        self._kept[key] = kept
        self.entries += kept.cost
        keys = self._by_rv.get(kept.rv)
        if keys is None:
            keys = self._by_rv[kept.rv] = set()
            heapq.heappush(self._rvs, kept.rv)
        keys.add(key)

    def _drop(self, key: tuple[int, Hashable]) -> None:
        kept = self._kept.pop(key)
        self.entries -= kept.cost
        keys = self._by_rv[kept.rv]
        keys.discard(key)
        if not keys:
            del self._by_rv[kept.rv]
            if len(self._rvs) > 2 * len(self._by_rv) + 64:
                self._rvs = list(self._by_rv)  # only RVs still kept (a dict's keys: no repeats)
                heapq.heapify(self._rvs)

    def _drop_expired(self, now: float) -> None:
        kept = self._kept
        while kept:
            key = next(iter(kept))
            if now - kept[key].used <= self.ttl:
                return
            self._drop(key)

    def forget_older(self, oldest: int) -> None:
        """Drop every state kept at an RV older than ``oldest`` (the log no longer reaches it:
        a read at it is refused)."""
        self._drop_older(oldest)

    def _drop_older(self, oldest: int) -> None:
        while self._rvs and self._rvs[0] < oldest:
            rv = heapq.heappop(self._rvs)
            for key in list(self._by_rv.get(rv, ())):
                self._drop(key)
