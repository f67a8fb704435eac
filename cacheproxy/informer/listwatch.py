"""What the informer needs of an API server: list pages and watch streams.

Defined here, by its consumer (as client-go's ``ListerWatcher`` = ``Lister`` + ``Watcher``).
``cacheproxy.upstream.ApiListerWatcher`` implements it over HTTP; tests may fake it. What to list
(resource, namespace, label and field selectors) is the implementation's own configuration; the
requests below carry only the per-call resource-version and paging options.

Errors: an implementation raises :class:`~cacheproxy.errors.ApiError` for an API answer (an HTTP
error status, or an in-stream ``ERROR`` event such as 410 Expired) and
:class:`~cacheproxy.errors.TransportError` when the server could not be reached or the stream
broke (reset, truncated chunk, a line that is not JSON).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "Decode",
    "ListPage",
    "ListRequest",
    "ListerWatcher",
    "WatchEvent",
    "WatchRequest",
    "WatchStream",
    "as_parsed",
]

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]


@dataclass(frozen=True, slots=True)
class ListRequest:
    """One list call's options (the list options of ``metav1.ListOptions`` the informer sets)."""

    resource_version: str = ""
    resource_version_match: str = ""
    limit: int = 0
    continue_token: str = ""


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a list: its items as ``decode`` made them (parsed objects by default;
    ``kind``/``apiVersion`` may be absent on typed lists)."""

    items: list[Any]
    resource_version: str
    continue_token: str = ""


@dataclass(frozen=True, slots=True)
class WatchRequest:
    """One watch call's options."""

    resource_version: str
    timeout_seconds: int
    allow_watch_bookmarks: bool = True
    send_initial_events: bool = False
    """A watch-list (KEP-3157): initial ADDED events, then a bookmark annotated
    ``k8s.io/initial-events-end``; sent with ``resourceVersionMatch=NotOlderThan``."""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a watch stream (``metav1.WatchEvent``): its type and the object as parsed."""

    type: EventType
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str(self.object.get("metadata", {}).get("resourceVersion", ""))

    @property
    def is_initial_events_end(self) -> bool:
        annotations = self.object.get("metadata", {}).get("annotations") or {}
        return self.type == "BOOKMARK" and annotations.get("k8s.io/initial-events-end") == "true"


WatchStream = AbstractAsyncContextManager[AsyncIterator[WatchEvent]]
Decode = Callable[[dict[str, Any]], Any]
"""What becomes of each listed item as it is read (see :meth:`ListerWatcher.list`)."""


def as_parsed(item: dict[str, Any]) -> Any:
    """The default :data:`Decode`: the item as parsed."""
    return item


class ListerWatcher(Protocol):
    """One collection of one API server (resource + namespace + selectors)."""

    async def list(self, request: ListRequest, *, decode: Decode = ...) -> ListPage:
        """One page; raise ApiError (e.g. 410 for an expired continue token) or TransportError.

        Each item goes through ``decode`` (default: kept as parsed) as soon as it is read, and
        the page holds what ``decode`` returned: an implementation reading a large response
        should not hold all its items parsed at once."""
        ...

    def watch(self, request: WatchRequest) -> WatchStream:
        """``async with lw.watch(req) as events: async for event in events`` — ends normally
        when the server closes the stream; ERROR events are raised as ApiError."""
        ...
