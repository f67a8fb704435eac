"""FakeListerWatcher: an in-memory, scriptable ListerWatcher — the test seam of the library.

It holds a collection and a resource version, serves paged lists from it, and streams watch
events that the test produces with :meth:`emit`. Scripted failures (:meth:`fail_next_list`,
:meth:`fail_next_watch`) and stream events (:meth:`end_watches`, :meth:`break_watches`) let a
test drive every Reflector rule; ``requests`` records what was asked, in order.
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from cacheproxy.informer.listwatch import (
    Decode,
    ListPage,
    ListRequest,
    WatchEvent,
    WatchRequest,
    WatchStream,
    as_parsed,
)
from cacheproxy.kube import status
from cacheproxy.kube.keys import object_key, object_namespace_name

__all__ = ["FakeListerWatcher"]

_END = object()


class FakeListerWatcher:
    """An in-memory :class:`~cacheproxy.informer.listwatch.ListerWatcher` a test scripts (see
    the module): one collection of ``kind``, with at most ``history`` watch events kept."""

    def __init__(
        self, *, kind: str = "ConfigMap", api_version: str = "v1", history: int = 1000
    ) -> None:
        self.kind = kind
        self.api_version = api_version
        self.rv = 1
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[ListRequest | WatchRequest] = []
        self._history: deque[WatchEvent] = deque(maxlen=history)
        self._streams: list[asyncio.Queue[Any]] = []
        self._list_failures: deque[BaseException] = deque()
        self._watch_failures: deque[BaseException] = deque()
        self.supports_watch_list = True
        self.late_initial_events_end = False
        """As kube-apiserver 1.27-1.30: a watch-list's initial-events-end bookmark is sent only
        once the collection sees its next change (on a quiet collection: never)."""
        self._owed_end: list[asyncio.Queue[Any]] = []

    # ------------------------------------------------------------------ test controls

    def emit(self, event_type: str, obj: dict[str, Any], *, missed: bool = False) -> dict[str, Any]:
        """Apply a change (ADDED/MODIFIED/DELETED) at the next RV and send it to open watches —
        unless ``missed``: then watchers never see it (as if it fell out of the history)."""
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        namespace, name = object_namespace_name(obj)
        key = object_key(namespace or None, name)
        if event_type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        event = WatchEvent(event_type, obj)  # type: ignore[arg-type]
        if missed:
            self._history.clear()
            return obj
        self._history.append(event)
        owed, self._owed_end = self._owed_end, []
        for stream in owed:  # at the RV of the initial events, before this change
            stream.put_nowait(self._initial_events_end(self.rv - 1))
        for stream in self._streams:
            stream.put_nowait(event)
        return obj

    def _initial_events_end(self, rv: int) -> WatchEvent:
        annotations = {"k8s.io/initial-events-end": "true"}
        meta = {"resourceVersion": str(rv), "annotations": annotations}
        return WatchEvent("BOOKMARK", {"kind": self.kind, "metadata": meta})

    def bookmark(self) -> None:
        event = WatchEvent(
            "BOOKMARK", {"kind": self.kind, "metadata": {"resourceVersion": str(self.rv)}}
        )
        for stream in self._streams:
            stream.put_nowait(event)

    def end_watches(self) -> None:
        for stream in self._streams:
            stream.put_nowait(_END)

    def break_watches(self, error: BaseException) -> None:
        for stream in self._streams:
            stream.put_nowait(error)

    def fail_next_list(self, error: BaseException) -> None:
        self._list_failures.append(error)

    def fail_next_watch(self, error: BaseException) -> None:
        """The next watch request fails when it starts."""
        self._watch_failures.append(error)

    def compact(self) -> None:
        self._history.clear()

    @property
    def open_watches(self) -> int:
        return len(self._streams)

    # ------------------------------------------------------------------ the protocol

    async def list(self, request: ListRequest, *, decode: Decode = as_parsed) -> ListPage:
        self.requests.append(request)
        await asyncio.sleep(0)
        if self._list_failures:
            raise self._list_failures.popleft()
        keys = sorted(self.objects)
        start = 0
        if request.continue_token:
            start = int(request.continue_token)
        end = start + request.limit if request.limit else len(keys)
        items = [decode(copy.deepcopy(self.objects[k])) for k in keys[start:end]]
        token = str(end) if end < len(keys) else ""
        return ListPage(items=items, resource_version=str(self.rv), continue_token=token)

    def watch(self, request: WatchRequest) -> WatchStream:
        self.requests.append(request)
        return self._watch(request)

    @asynccontextmanager
    async def _watch(self, request: WatchRequest) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        await asyncio.sleep(0)
        if self._watch_failures:
            raise self._watch_failures.popleft()
        if request.send_initial_events and not self.supports_watch_list:
            raise status.invalid_list_options(
                [
                    status.forbidden_cause(
                        "sendInitialEvents", "sendInitialEvents is forbidden for watch"
                    )
                ]
            )
        queue: asyncio.Queue[Any] = asyncio.Queue()
        if request.send_initial_events:
            for key in sorted(self.objects):
                queue.put_nowait(WatchEvent("ADDED", copy.deepcopy(self.objects[key])))
            if self.late_initial_events_end:
                self._owed_end.append(queue)
            else:
                queue.put_nowait(self._initial_events_end(self.rv))
        else:
            since = int(request.resource_version or 0)
            oldest = int(self._history[0].resource_version) if self._history else self.rv + 1
            if since and since + 1 < oldest and since < self.rv:
                queue.put_nowait(status.too_old_resource_version(since, oldest))
            else:
                for event in self._history:
                    if int(event.resource_version) > since:
                        queue.put_nowait(event)
        self._streams.append(queue)
        try:
            yield _drain(queue)
        finally:
            self._streams.remove(queue)
            if queue in self._owed_end:
                self._owed_end.remove(queue)


async def _drain(queue: asyncio.Queue[Any]) -> AsyncIterator[WatchEvent]:
    while True:
        item = await queue.get()
        if item is _END:
            return
        if isinstance(item, BaseException):
            raise item
        yield item
