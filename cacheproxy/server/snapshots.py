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
first (``cachetools.TTLCache``). A snapshot holds references to the store's immutable entries, not copies: it costs a list.

Consistency: a snapshot at N is what a rebuild at N gives for as long as the EventLog still
reaches N and no relist replaced the store (between relists the store changes only by logged
events). :meth:`SnapshotCache.view` is told the oldest RV the log reaches and drops what is older
(the rebuild then refuses, as before), and the owner calls :meth:`SnapshotCache.clear` on a
relist: a kept snapshot never answers what a rebuild would refuse or answer differently.
"""

from __future__ import annotations

import bisect
import operator
import time
from collections.abc import Callable, Hashable

from cachetools import TTLCache

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


class SnapshotCache:
    """Snapshots by RV and their parts by (RV, query), bounded by age since last use and by the
    entries they reference (least recently used dropped first): a ``cachetools.TTLCache``
    weighted by entries, each use putting its item back (a new time to live, the most recent
    place).

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
        self._kept: TTLCache[tuple[int, Hashable], Snapshot] = TTLCache(
            maxsize=max_entries, ttl=ttl, timer=clock, getsizeof=_cost
        )
        self.builds = 0
        self._oldest = _NONE_KEPT
        """No RV older than this is kept (a bound, exact after each :meth:`forget_older`)."""

    def __len__(self) -> int:
        self._kept.expire()
        return len(self._kept)

    @property
    def entries(self) -> int:
        """Entries referenced by what is kept (a snapshot's and its parts' entries count apart;
        one more for each item)."""
        self._kept.expire()
        return int(self._kept.currsize)

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
        self.forget_older(oldest)
        if query is not None and (part := self._get((rv, query))) is not None:
            return part
        whole = self._get((rv, None))
        if whole is None:
            whole = build()
            self.builds += 1
            if keep:
                self._put((rv, None), whole)
        if query is None:
            return whole
        part = select(whole)
        if keep:
            self._put((rv, query), part)
        return part

    def clear(self) -> None:
        """Forget everything (the store was replaced: a relist)."""
        self._kept.clear()
        self._oldest = _NONE_KEPT

    def forget_older(self, oldest: int) -> None:
        """Drop every state kept at an RV older than ``oldest`` (the log no longer reaches it:
        a read at it is refused). O(1) while nothing kept is that old."""
        if oldest <= self._oldest:
            return
        kept = self._kept
        for key in [key for key in kept if key[0] < oldest]:
            kept.pop(key, None)
        self._oldest = min((key[0] for key in kept), default=_NONE_KEPT)

    def _get(self, key: tuple[int, Hashable]) -> Snapshot | None:
        snapshot = self._kept.pop(key, None)
        if snapshot is not None:
            self._kept[key] = snapshot  # used: its time to live starts again
        return snapshot

    def _put(self, key: tuple[int, Hashable], snapshot: Snapshot) -> None:
        self._kept.pop(key, None)
        if _cost(snapshot) > self.max_entries:
            return  # larger than the whole budget: served once, not kept
        self._kept[key] = snapshot
        self._oldest = min(self._oldest, key[0])


_NONE_KEPT = 1 << 62
""":attr:`SnapshotCache._oldest` while nothing is kept."""


def _cost(snapshot: Snapshot) -> int:
    return len(snapshot) + 1
