"""Watches of the simulator: the per-watcher buffer, selector transitions and the event stream.

Mirrors the API server's ``cacheWatcher``:

- every write of the watched resource is *offered* synchronously by the store; a watcher whose
  buffer is full is closed (the API server terminates slow watchers rather than block writes);
- only events newer than the watch's starting RV are sent (``cacheWatcher.process``), so a watch
  from an RV its cache has not reached yet starts quietly;
- selectors follow the transition rule (``convertToWatchEvent``,
  :func:`cacheproxy.kube.transitions.seen`): an object that stops matching is sent as DELETED,
  one that starts matching as ADDED;
- bookmarks, only when asked, every ``bookmark_interval`` and ~2 s before the deadline; their
  object is the kind's empty object with only ``metadata.resourceVersion`` set, the RV the
  resource's cache has reached. With per-resource caches a bookmark that would not be newer than
  the watch's RV is not sent, as the watch cache skips it;
- a watch-list (``sendInitialEvents=true`` with bookmarks) ends its initial events with a bookmark
  annotated ``k8s.io/initial-events-end: "true"``, once its resource's cache has reached the RV
  the watch-list asked for: at once, or (1.27-1.30, a quiet resource) with the next write of the
  resource or the next progress notification.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass

import orjson

from cacheproxy.kube.fields import FieldSelector
from cacheproxy.kube.labels import LabelSelector
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.transitions import Seen, seen
from cacheproxy.kube.versions import NEWEST, KubeVersion
from cacheproxy.kube.watchevents import bookmark_line, event_line
from cacheproxy.serving import Mailbox, watch_batches
from cacheproxy.sim.storage import Event, Progress, StoredObject, WatchSink

__all__ = ["SimWatchPlan", "SimWatcher", "stream_watch"]


def _as_deleted_at(stored: StoredObject, rv: int) -> bytes:
    """The old object, stamped with the RV of the event that made it stop matching."""
    obj = dict(stored.obj)
    obj["metadata"] = {**stored.obj["metadata"], "resourceVersion": str(rv)}
    moved = StoredObject(rtype=stored.rtype, key=stored.key, obj=obj, rv=rv, body=orjson.dumps(obj))
    return moved.full


class SimWatcher(WatchSink, Mailbox[Event | Progress]):
    """One watch: filter, bounded buffer of pending events, closed on overflow or on demand."""

    def __init__(
        self,
        *,
        rtype: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        buffer: int = 10_000,
        start_rv: int = 0,
        kube: KubeVersion = NEWEST,
    ) -> None:
        self.rtype = rtype
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.start_rv = start_rv
        """Events at or before this RV are not sent (the watch started after them)."""
        self.end_bookmark_after: int | None = None
        """While set: the RV the cache must reach before the initial-events-end bookmark."""
        self.kube = kube
        """The version whose bookmarks it sends (the end bookmark's blueprint: 1.32, 1.33)."""
        Mailbox.__init__(self, buffer)

    def visible(self, stored: StoredObject) -> bool:
        if self.namespace and not stored.key.startswith(self.namespace + "/"):
            return False
        return stored.matches(self.labels, self.fields)

    def offer(self, event: Event | Progress) -> None:
        self.put(event)

    def line_for(self, event: Event) -> bytes | None:
        """The event as this watcher sees it, or None when it does not concern it."""
        if event.rv <= self.start_rv:
            return None
        kind = seen(
            event.type,
            matched_before=event.prev is not None and self.visible(event.prev),
            matches_now=event.type != "DELETED" and self.visible(event.obj),
        )
        if kind is None:
            return None
        if kind is Seen.LEFT:
            assert event.prev is not None
            return event_line("DELETED", _as_deleted_at(event.prev, event.rv))
        return event_line(kind.event_type, event.obj.full)

    def end_line(self, cache_rv: int) -> bytes | None:
        """The initial-events-end bookmark, once the cache has reached ``cache_rv`` and it is
        owed; None otherwise."""
        if self.end_bookmark_after is None or cache_rv < self.end_bookmark_after:
            return None
        self.end_bookmark_after = None
        return bookmark_line(
            self.rtype,
            cache_rv,
            initial_events_end=True,
            blueprint=self.kube.sends_list_blueprint,
            zero_time=self.kube.writes_zero_times,
        )

    def take(self) -> list[bytes]:
        """The pending events as this watcher's lines (those that concern it), with the
        initial-events-end bookmark where its cache reached the RV it waits for."""
        lines = []
        for item in self.drain():
            if isinstance(item, Event):
                line = self.line_for(item)
                if line is not None:
                    lines.append(line)
            end = self.end_line(item.rv)
            if end is not None:
                lines.append(end)
        return lines


@dataclass(slots=True)
class SimWatchPlan:
    """What one watch sends before live events, and its schedule."""

    initial: Sequence[StoredObject]
    """Synthetic ADDED events (current state), key order."""
    replay: Sequence[Event]
    """History after the requested RV."""
    end_bookmark_after: int | None
    """For a watch-list that asked for bookmarks: the RV its resource's cache must reach before
    the initial-events-end bookmark."""
    allow_bookmarks: bool
    timeout: float
    bookmark_interval: float
    only_newer_bookmarks: bool = False
    """Send a bookmark only when its RV is newer than the watch's (per-resource caches)."""


async def stream_watch(
    watcher: SimWatcher,
    plan: SimWatchPlan,
    *,
    current_rv: Callable[[], int],
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[bytes]:
    """The bytes of a watch response, chunk by chunk, until the deadline or the watcher closes.
    ``current_rv`` is the RV the watched resource's cache has reached."""

    def first() -> Iterator[list[bytes]]:
        batch: list[bytes] = []
        for stored in plan.initial:
            batch.append(event_line("ADDED", stored.full))
            if len(batch) >= 256:
                yield batch
                batch = []
        for event in plan.replay:
            line = watcher.line_for(event)
            if line is not None:
                batch.append(line)
        watcher.end_bookmark_after = plan.end_bookmark_after
        end = watcher.end_line(current_rv())
        if end is not None:
            batch.append(end)
        yield batch

    def bookmark() -> bytes:
        rv = current_rv()
        if watcher.end_bookmark_after is not None:
            return b""  # the initial events have not ended yet
        if plan.only_newer_bookmarks and rv <= watcher.start_rv:
            return b""
        return bookmark_line(watcher.rtype, rv, zero_time=watcher.kube.writes_zero_times)

    async for lines in watch_batches(
        watcher,
        first=first(),
        seconds=plan.timeout,
        bookmark=bookmark if plan.allow_bookmarks else None,
        bookmark_interval=plan.bookmark_interval,
        clock=clock,
    ):
        data = b"".join(lines)
        if data:
            yield data
