"""Watches of the simulator: the per-watcher buffer, selector transitions and the event stream.

Mirrors the API server's ``cacheWatcher``:

- every write of the watched resource is *offered* synchronously by the store; a watcher whose
  buffer is full is closed (the API server terminates slow watchers rather than block writes);
- selectors follow the transition rule (``convertToWatchEvent``): an object that stops matching
  is sent as DELETED, one that starts matching as ADDED;
- bookmarks, only when asked, every ``bookmark_interval`` and ~2 s before the deadline; their
  object is the kind's empty object with only ``metadata.resourceVersion`` set;
- a watch-list (``sendInitialEvents=true``) ends its initial events with a bookmark annotated
  ``k8s.io/initial-events-end: "true"`` (sent right away, as current servers do).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import orjson

from cacheproxy.kube.fields import FieldSelector
from cacheproxy.kube.labels import LabelSelector
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.watchevents import bookmark_line, event_line
from cacheproxy.serving import Mailbox, live_lines
from cacheproxy.sim.store import Event, StoredObject, WatchSink

__all__ = ["SimWatcher", "WatchPlan", "stream_watch"]


def _as_deleted_at(stored: StoredObject, rv: int) -> bytes:
    """The old object, stamped with the RV of the event that made it stop matching."""
    obj = dict(stored.obj)
    obj["metadata"] = {**stored.obj["metadata"], "resourceVersion": str(rv)}
    moved = StoredObject(rtype=stored.rtype, key=stored.key, obj=obj, rv=rv, body=orjson.dumps(obj))
    return moved.full


class SimWatcher(WatchSink, Mailbox[Event]):
    """One watch: filter, bounded buffer of pending events, closed on overflow or on demand."""

    def __init__(
        self,
        *,
        rtype: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        buffer: int = 10_000,
    ) -> None:
        self.rtype = rtype
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        Mailbox.__init__(self, buffer)

    def visible(self, stored: StoredObject) -> bool:
        if self.namespace and not stored.key.startswith(self.namespace + "/"):
            return False
        return stored.matches(self.labels, self.fields)

    def offer(self, event: Event) -> None:
        self.put(event)

    def line_for(self, event: Event) -> bytes | None:
        """The event as this watcher sees it, or None when it does not concern it."""
        new_visible = event.type != "DELETED" and self.visible(event.obj)
        old_visible = event.prev is not None and self.visible(event.prev)
        if event.type == "DELETED":
            return event_line("DELETED", event.obj.full) if old_visible else None
        if new_visible and old_visible:
            return event_line("MODIFIED", event.obj.full)
        if new_visible:
            return event_line("ADDED", event.obj.full)
        if old_visible and event.prev is not None:
            return event_line("DELETED", _as_deleted_at(event.prev, event.rv))
        return None

    def take(self) -> list[bytes]:
        """The pending events as this watcher's lines (those that concern it)."""
        return [line for event in self.drain() if (line := self.line_for(event)) is not None]


@dataclass(slots=True)
class WatchPlan:
    """What one watch sends before live events, and its schedule."""

    initial: Sequence[StoredObject]
    """Synthetic ADDED events (current state), key order."""
    replay: Sequence[Event]
    """History after the requested RV."""
    end_bookmark_rv: int | None
    """RV of the initial-events-end bookmark, when a watch-list asked for one."""
    allow_bookmarks: bool
    timeout: float
    bookmark_interval: float


async def stream_watch(
    watcher: SimWatcher,
    plan: WatchPlan,
    *,
    current_rv: Callable[[], int],
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[bytes]:
    """The bytes of a watch response, chunk by chunk, until the deadline or the watcher closes."""
    deadline = clock() + plan.timeout
    batch: list[bytes] = []
    for stored in plan.initial:
        batch.append(event_line("ADDED", stored.full))
        if len(batch) >= 256:
            yield b"".join(batch)
            batch.clear()
    for event in plan.replay:
        line = watcher.line_for(event)
        if line is not None:
            batch.append(line)
    if plan.end_bookmark_rv is not None:
        batch.append(bookmark_line(watcher.rtype, plan.end_bookmark_rv, initial_events_end=True))
    if batch:
        yield b"".join(batch)
        batch.clear()

    bookmark = (
        (lambda: bookmark_line(watcher.rtype, current_rv())) if plan.allow_bookmarks else None
    )
    async for chunk in live_lines(
        watcher,
        deadline=deadline,
        bookmark=bookmark,
        bookmark_interval=plan.bookmark_interval,
        clock=clock,
    ):
        yield b"".join(chunk)
