"""The cache's events as the server's watchers see them: one decision per watcher and event, one
line per event and form, and RVs for what a relist changed.

- :func:`watcher_sees` decides what a watcher sees of one event: the API server's transition rule
  (:func:`cacheproxy.kube.transitions.seen`) over whether the watcher's query matched the previous
  state and matches the new one. The live fan-out (:class:`~.watchhub.WatchHub`) and history
  replay (:func:`replay_lines`) both decide with it, so a resumed watch sees the past exactly as a
  connected one saw it.
- :class:`EventLines` builds an event's line in each form watchers see it on first use, shared by
  all of them (docs/design.md §3: the bytes of each event are built once): ADDED, MODIFIED and DELETED
  from the stored parts without copying the object, the DELETED of an object that left a selector
  (the previous object restamped with the event's RV) once. Each is a :class:`SharedLine`, which
  counts the watcher queues holding it, so the bytes queued are counted once per line.
- :func:`relist_events` turns what an upstream relist changed into events for connected watchers
  (they survive a relist; the API server would close them): when each vanished object was deleted
  is unknown, so serving decides which RVs its DELETED events carry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from cacheproxy.informer.events import Changed, Relisted
from cacheproxy.informer.store import Entry, Store
from cacheproxy.kube.partial import Reform
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.transitions import Seen, seen
from cacheproxy.kube.watchevents import EVENT_HEADS, EVENT_TAIL, event_line
from cacheproxy.server.query import EntryView, Query, matches_view

__all__ = ["EventLines", "SharedLine", "relist_events", "replay_lines", "watcher_sees"]

log = logging.getLogger(__name__)

_EVENT_HEADS = {kind: EVENT_HEADS[kind.value] for kind in (Seen.ADDED, Seen.MODIFIED, Seen.DELETED)}


_SEEN = {
    event_type: tuple(
        tuple(seen(event_type, matched_before=before, matches_now=now) for now in (False, True))
        for before in (False, True)
    )
    for event_type in ("ADDED", "MODIFIED", "DELETED")
}
""":func:`~cacheproxy.kube.transitions.seen` for every event type and both matches, indexed
``[type][matched before][matches now]``: the fan-out asks it for every watcher of every event,
and a lookup costs a fraction of a call."""


def watcher_sees(
    event: Changed, query: Query, new: EntryView, old: EntryView | None
) -> Seen | None:
    """What a watcher with ``query`` sees of ``event`` (None: nothing). ``new`` and ``old`` are
    views of the event's entry and previous entry, shared between watchers."""
    event_type = event.type
    before = old is not None and matches_view(old, query)
    now = event_type != "DELETED" and matches_view(new, query)
    return _SEEN[event_type][before][now]


def _restamped(entry: Entry, rv: int) -> bytes:
    """``entry`` with ``metadata.resourceVersion`` set to ``rv``."""
    obj = entry.object()
    obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
    return orjson.dumps(obj)


class SharedLine:
    """One line, built once, as the queues of the watchers it is for hold it: its bytes, and how
    many queues hold it now (one more when a queue takes it, one less when it leaves that queue,
    sent or dropped). The bytes queued for all watchers count it while any queue holds it
    (:class:`~.watchhub.QueuedBytes`)."""

    __slots__ = ("data", "holders", "size")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)
        self.holders = 0
        """The queues holding it now (a queue holding it twice counts twice)."""

    def __repr__(self) -> str:
        return f"SharedLine({self.size} bytes, {self.holders} holders)"


class EventLines:
    """The lines of one event, built on first use and shared by all watchers: per kind of
    watcher_sees, and per form (as stored, or re-encoded by a :class:`~cacheproxy.kube.partial.Reform`)."""

    __slots__ = ("_cache", "event")

    def __init__(self, event: Changed) -> None:
        self.event = event
        self._cache: dict[tuple[Seen, Reform | None], SharedLine] = {}

    def line(self, kind: Seen, reform: Reform | None = None) -> SharedLine:
        shared = self._cache.get((kind, reform))
        if shared is None:
            event = self.event
            if kind is Seen.LEFT:  # stopped matching: the old object at this event's RV
                assert event.prev is not None
                obj = _restamped(event.prev, event.rv)
                if reform is not None:
                    obj = reform.encode(obj)
                line = event_line("DELETED", obj)
            elif reform is not None:
                line = event_line(kind.value, reform.encode(event.entry.raw))
            else:
                entry = event.entry
                line = b"".join((_EVENT_HEADS[kind], entry.prefix, entry.body, EVENT_TAIL))
            shared = self._cache[kind, reform] = SharedLine(line)
        return shared


def replay_lines(
    events: Iterable[Changed],
    query: Query,
    rtype: ResourceType,
    store: Store,
    *,
    reform: Reform | None = None,
) -> list[bytes]:
    """History (the EventLog's events after a watch's RV) as a watcher with ``query`` sees it
    (each object re-encoded by ``reform`` when given)."""
    lines = []
    for event in events:
        new = EntryView(event.entry, rtype, store)
        old = EntryView(event.prev, rtype, store) if event.prev is not None else None
        kind = watcher_sees(event, query, new, old)
        if kind is not None:
            lines.append(EventLines(event).line(kind, reform).data)
    return lines


def relist_events(
    difference: Relisted,
    *,
    make_entry: Callable[[dict[str, Any]], Entry],
    now: float,
    name: str,
) -> list[Changed]:
    """What a relist changed, as events: one per resourceVersion, in ascending order, ending at
    most at the relist's RV.

    ADDED and MODIFIED objects carry their own RVs. When each vanished object was deleted is
    unknown — only that it was, after ``difference.before`` (what the cache had seen) and by
    ``difference.rv`` — so each DELETED gets a distinct RV of that interval that no changed object
    holds: every deletion consumed a revision there, so there are enough (the highest are used).
    Distinct RVs keep resumes exact: a client whose stream breaks inside the difference resumes
    from an RV below the relist's and gets 410 (the EventLog restarts at the relist's RV), never
    a silent loss of the deletions it did not see (``tests/soak/test_relist_difference.py``).
    ``make_entry`` stores the restamped last state of a vanished object.
    """
    rv, before = difference.rv, difference.before
    events = [
        Changed(entry.rv, "ADDED" if prev is None else "MODIFIED", entry, prev, now)
        for entry, prev in difference.changed
    ]
    taken = {e.rv for e in events}
    free = (r for r in range(rv, before, -1) if r not in taken)
    for last in difference.gone.values():
        stamp = next(free, rv)
        if stamp == rv and rv in taken:
            log.warning(
                "%s: more deletions than revisions between %d and %d: a resume inside this "
                "relist's difference may miss deletions",
                name,
                before,
                rv,
            )
        taken.add(stamp)
        obj = last.object()
        obj.setdefault("metadata", {})["resourceVersion"] = str(stamp)
        events.append(Changed(stamp, "DELETED", make_entry(obj), last, now))
    events.sort(key=lambda e: e.rv)
    return events
