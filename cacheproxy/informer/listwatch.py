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

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "ListPage",
    "ListRequest",
    "ListerWatcher",
    "WatchEvent",
    "WatchRequest",
    "WatchStream",
]

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]


@dataclass(frozen=True, slots=True)
class ListRequest:
    resource_version: str = ""
    resource_version_match: str = ""
    limit: int = 0
    continue_token: str = ""


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a list: parsed items (``kind``/``apiVersion`` may be absent on typed lists)."""

    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str = ""


@dataclass(frozen=True, slots=True)
class WatchRequest:
    resource_version: str
    timeout_seconds: int
    allow_watch_bookmarks: bool = True
    send_initial_events: bool = False
    """A watch-list (KEP-3157): initial ADDED events, then a bookmark annotated
    ``k8s.io/initial-events-end``; sent with ``resourceVersionMatch=NotOlderThan``."""


@dataclass(frozen=True, slots=True)
class WatchEvent:
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


class ListerWatcher(Protocol):
    """One collection of one API server (resource + namespace + selectors)."""

    async def list(self, request: ListRequest) -> ListPage:
        """One page; raise ApiError (e.g. 410 for an expired continue token) or TransportError."""
        ...

    def watch(self, request: WatchRequest) -> WatchStream:
        """``async with lw.watch(req) as events: async for event in events`` — ends normally
        when the server closes the stream; ERROR events are raised as ApiError."""
        ...
