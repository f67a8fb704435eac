"""The EventLog: the most recent events of one informer, in RV order, for watch resumes.

Like the API server's watch cache history (``watch_cache_history.go``): a ring bounded by count,
kept at least ``min_age`` seconds when that fits under the cap. "Events after RV N" is answered
from it, or refused as too old (the caller turns that into 410 Expired). An upstream relist
restarts it at the relist RV: nothing before the relist can be resumed across it.

It is one of its informer's subscribers (:meth:`EventLog.record`): it keeps the
:class:`~.events.Changed` events, restarts at each :class:`~.events.Relisted` and moves with
each :class:`~.events.Progressed`.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable

from cacheproxy.informer.events import Changed, InformerEvent, Progressed, Relisted
from cacheproxy.informer.store import Entry

__all__ = ["EventLog", "TooOld"]


class TooOld(Exception):
    """The requested RV is older than the log holds. ``oldest`` is the oldest RV a watch may
    still start from — the number the API server names in its message (watch cache:
    "too old resource version: R (oldest event's RV - 1)"), so a client retrying from it works."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


class EventLog:
    """RV-ordered ring of recent events. One writer; readers get immutable snapshots (lists)."""

    def __init__(
        self,
        *,
        max_events: int = 100_000,
        min_age: float = 75.0,
        min_events: int = 1_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_events = max_events
        self.min_age = min_age
        self.min_events = min(min_events, max_events)
        self._clock = clock
        self._events: deque[Changed] = deque()
        self._start_rv = 0
        """Events after this RV are all here: a resume from RV ≥ start is answerable."""

    def __len__(self) -> int:
        return len(self._events)

    @property
    def oldest_resumable(self) -> int:
        return self._start_rv

    @property
    def last_rv(self) -> int:
        return self._events[-1].rv if self._events else self._start_rv

    def reset(self, rv: int) -> None:
        """Forget everything: resumes are answerable from ``rv`` on (after a relist)."""
        self._events.clear()
        self._start_rv = rv

    def record(self, event: InformerEvent) -> None:
        """Its informer's subscriber: keep a change, restart at a relist, move at a bookmark."""
        match event:
            case Changed():
                self._events.append(event)
                self._trim(event.at)
            case Relisted(rv=rv):
                self.reset(rv)
            case Progressed(rv=rv):
                self.advance(rv)

    def append(self, event_type: str, entry: Entry, prev: Entry | None, rv: int) -> Changed:
        """Keep a change made here (a log fed by hand, not by an informer)."""
        event = Changed(rv, event_type, entry, prev, self._clock())
        self.record(event)
        return event

    def advance(self, rv: int) -> None:
        """A bookmark at ``rv``: nothing happened in between, so resumes from ``rv`` are fine."""
        if not self._events and rv > self._start_rv:
            self._start_rv = rv

    def since(self, rv: int) -> list[Changed]:
        """Events with RV > ``rv``, oldest first. ``TooOld`` when some were dropped."""
        if rv < self._start_rv:
            raise TooOld(rv, self._start_rv)
        events = self._events
        if not events or events[-1].rv <= rv:
            return []
        # deque has no bisect; events are RV-ordered, so search a list view only when needed.
        if events[0].rv > rv:
            return list(events)
        ordered = list(events)
        i = bisect_right(ordered, rv, key=lambda e: e.rv)
        return ordered[i:]

    def _trim(self, now: float) -> None:
        events = self._events
        while len(events) > self.max_events:
            self._start_rv = events.popleft().rv
        # Beyond min_events, keep what is younger than min_age.
        while len(events) > self.min_events and now - events[0].at > self.min_age:
            self._start_rv = events.popleft().rv
