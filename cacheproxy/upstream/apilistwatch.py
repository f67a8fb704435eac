"""The informer's :class:`~cacheproxy.informer.listwatch.ListerWatcher` over the Kubernetes API.

:class:`ApiListerWatcher` lists and watches one collection (resource, optional namespace, label
and field selectors) through a shared ``httpx.AsyncClient`` (see :mod:`.client`):

- ``list`` is one ``GET`` of the collection: one page, its items split out of the body as it
  arrives and handed to ``decode`` one at a time (the informer makes its compact entries there),
  so a 70 MB list is never a 70 MB string nor half a gigabyte of dicts.
- ``watch`` is a ``GET …?watch=1`` read as newline-framed JSON ``WatchEvent`` lines (the API
  server flushes whole lines; a line may still arrive split across chunks). The stream ends
  normally when the server closes it (timeout, shutdown, a slow watcher dropped) — never with a
  terminal event, except one ``ERROR`` event (e.g. 410 Expired), raised as ApiError. A line that
  is not a JSON event, or a stream that stops in the middle of a line, is a TransportError.

:func:`list_all` is client-go's ``ListPager`` on top of any ListerWatcher; :func:`get_version`
reads ``/version``. Every failure is translated once, by :mod:`.apierrors`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypedDict, cast

import httpx
import orjson

from cacheproxy.errors import TransportError
from cacheproxy.informer import (
    Collection,
    Decode,
    ListerWatcher,
    ListerWatcherFactory,
    ListPage,
    ListRequest,
    ReflectorOptions,
    WatchEvent,
    WatchRequest,
    WatchStream,
    as_parsed,
    list_pages,
)
from cacheproxy.kube.liststream import ListSplitter, NotAList
from cacheproxy.kube.resources import ResourceType
from cacheproxy.upstream.apierrors import (
    api_error_from_response,
    api_error_from_status,
    describe_request,
    transport_error,
)
from cacheproxy.upstream.client import LIST_TIMEOUT, WATCH_TIMEOUT

__all__ = [
    "ApiListerWatcher",
    "VersionInfo",
    "get_version",
    "list_all",
    "lister_watchers",
    "send_for_json",
]

log = logging.getLogger(__name__)

_EVENT_TYPES = frozenset(("ADDED", "MODIFIED", "DELETED", "BOOKMARK"))
_EXCERPT = 120
_Params = list[tuple[str, Any]]
"""A request's query parameters, in order (``list`` is also a method's name in the class)."""


class ApiListerWatcher:
    """Lists and watches one collection of the API server behind ``client``.

    Holds no state between calls and may be used concurrently; the client belongs to the caller.
    List items and event objects are fresh dicts the caller owns.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        rtype: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> None:
        self.client = client
        self.rtype = rtype
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.path = rtype.collection_path(namespace)

    def __repr__(self) -> str:
        where = f" in {self.namespace}" if self.namespace and self.rtype.namespaced else ""
        selectors = "".join(
            f", {name}={value!r}"
            for name, value in (("labels", self.label_selector), ("fields", self.field_selector))
            if value
        )
        return f"ApiListerWatcher({self.rtype.qualified}{where}{selectors})"

    def _selectors(self) -> _Params:
        params: _Params = []
        if self.label_selector:
            params.append(("labelSelector", self.label_selector))
        if self.field_selector:
            params.append(("fieldSelector", self.field_selector))
        return params

    async def list(self, request: ListRequest, *, decode: Decode = as_parsed) -> ListPage:
        params = self._selectors()
        if request.resource_version:
            params.append(("resourceVersion", request.resource_version))
        if request.resource_version_match:
            params.append(("resourceVersionMatch", request.resource_version_match))
        if request.limit > 0:
            params.append(("limit", str(request.limit)))
        if request.continue_token:
            params.append(("continue", request.continue_token))
        async with self._get(params, timeouts=LIST_TIMEOUT) as response:
            return await _read_list(response, decode)

    def watch(self, request: WatchRequest) -> WatchStream:
        return self._watch(request)

    @asynccontextmanager
    async def _watch(
        self, request: WatchRequest
    ) -> AsyncGenerator[AsyncIterator[WatchEvent], None]:
        params: _Params = [("watch", "1"), *self._selectors()]
        if request.resource_version:
            params.append(("resourceVersion", request.resource_version))
        if request.timeout_seconds > 0:
            params.append(("timeoutSeconds", str(request.timeout_seconds)))
        if request.allow_watch_bookmarks:
            params.append(("allowWatchBookmarks", "true"))
        if request.send_initial_events:
            # KEP-3157 watch-list; the API server requires NotOlderThan with it.
            params.append(("sendInitialEvents", "true"))
            params.append(("resourceVersionMatch", "NotOlderThan"))
        async with self._get(params, timeouts=WATCH_TIMEOUT) as response:
            events = _WatchEvents(response)
            try:
                yield events
            finally:
                await events.aclose()

    @asynccontextmanager
    async def _get(
        self, params: _Params, *, timeouts: httpx.Timeout
    ) -> AsyncGenerator[httpx.Response, None]:
        """The collection's streamed response to a ``GET`` with ``params``, once it answered with
        success (an error answer is read whole and raised as ApiError); closed on the way out."""
        http_request = self.client.build_request("GET", self.path, params=params, timeout=timeouts)
        try:
            response = await self.client.send(http_request, stream=True)
        except httpx.HTTPError as exc:
            raise transport_error(exc) from exc
        try:
            if not response.is_success:
                try:
                    await response.aread()
                except httpx.HTTPError as exc:
                    raise transport_error(exc) from exc
                raise api_error_from_response(response)
            yield response
        finally:
            await response.aclose()


class _WatchEvents:
    """The events of one watch response: split into lines at the byte level (no text decoding:
    orjson parses bytes) and decoded one at a time as the caller asks. After an ERROR event, a
    broken line or :meth:`aclose`, nothing more is yielded."""

    def __init__(self, response: httpx.Response) -> None:
        self._chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
        self._where = describe_request(response.request)
        self._lines: deque[bytes] = deque()
        self._partial: list[bytes] = []
        self._done = False

    def __aiter__(self) -> _WatchEvents:
        return self

    async def __anext__(self) -> WatchEvent:
        while not self._lines:
            if self._done:
                raise StopAsyncIteration
            try:
                chunk = await anext(self._chunks)
            except StopAsyncIteration:
                self._done = True
                if self._partial:
                    size = sum(len(p) for p in self._partial)
                    raise TransportError(
                        f"{self._where}: the watch stream ended in the middle of an event "
                        f"({size} bytes without a newline)"
                    ) from None
                raise
            except httpx.HTTPError as exc:
                self._stop()
                raise transport_error(exc, during="the watch stream") from exc
            self._feed(chunk)
        return self._decode(self._lines.popleft())

    def _feed(self, chunk: bytes) -> None:
        if b"\n" not in chunk:
            self._partial.append(chunk)
            return
        if self._partial:
            self._partial.append(chunk)
            chunk = b"".join(self._partial)
            self._partial.clear()
        *lines, rest = chunk.split(b"\n")
        self._lines.extend(line for line in lines if line and not line.isspace())
        if rest and not rest.isspace():
            self._partial.append(rest)

    def _decode(self, line: bytes) -> WatchEvent:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            self._stop()
            raise TransportError(
                f"{self._where}: the watch stream sent a line that is not JSON ({exc}): "
                f"{line[:_EXCERPT]!r}"
            ) from exc
        event_type = event.get("type") if isinstance(event, dict) else None
        obj = event.get("object") if isinstance(event, dict) else None
        if event_type in _EVENT_TYPES and isinstance(obj, dict):
            return WatchEvent(event_type, obj)
        self._stop()
        if event_type == "ERROR":
            error = api_error_from_status(obj)
            if error is not None:
                raise error
        raise TransportError(
            f"{self._where}: the watch stream sent something that is not a watch event: "
            f"{line[:_EXCERPT]!r}"
        )

    def _stop(self) -> None:
        self._done = True
        self._lines.clear()
        self._partial.clear()

    async def aclose(self) -> None:
        # Closes httpx's outermost byte iterator; the generators under it are finalized by the
        # event loop's async-generator hooks a few loop iterations later (httpx's usual way).
        self._stop()
        await self._chunks.aclose()


async def send_for_json(client: httpx.AsyncClient, request: httpx.Request) -> Any:
    """Send ``request`` and parse its JSON body; errors translated."""
    try:
        response = await client.send(request)
    except httpx.HTTPError as exc:
        raise transport_error(exc) from exc
    if not response.is_success:
        raise api_error_from_response(response)
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError as exc:
        raise TransportError(
            f"{describe_request(request)}: the response is not JSON ({exc}): "
            f"{response.content[:_EXCERPT]!r}"
        ) from exc


async def _read_list(response: httpx.Response, decode: Decode) -> ListPage:
    """A list response's items, each decoded as soon as its bytes are in (a large list is never
    held whole, neither as bytes nor as dicts: see :class:`~cacheproxy.kube.liststream.
    ListSplitter`), and its RV and continue token."""
    where = describe_request(response.request)
    splitter = ListSplitter()
    items: list[Any] = []
    try:
        async for chunk in response.aiter_bytes():
            items.extend([decode(item) for item in splitter.feed(chunk)])
        last, shell = splitter.close()
    except httpx.HTTPError as exc:
        raise transport_error(exc, during="the list") from exc
    except NotAList as exc:
        raise TransportError(f"{where}: expected a list: {exc}") from exc
    if shell.get("kind") == "Table":
        # client-go's reflector refuses a Table too (kubernetes#132926): it is no list.
        raise TransportError(f"{where}: expected a list, got Table")
    items.extend([decode(item) for item in last])
    metadata = shell.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise TransportError(f"{where}: the list's metadata is not an object")
    return ListPage(
        items=items,
        resource_version=str(metadata.get("resourceVersion") or ""),
        continue_token=str(metadata.get("continue") or ""),
    )


def lister_watchers(client: httpx.AsyncClient) -> ListerWatcherFactory:
    """What an :class:`~cacheproxy.informer.SharedInformerFactory` makes its informers' ListerWatchers
    with, over ``client``: each :class:`~cacheproxy.informer.Collection`'s namespace, label
    selector and field selector sent upstream as given (nothing to pass again by hand)."""

    def make(collection: Collection) -> ApiListerWatcher:
        return ApiListerWatcher(
            client,
            collection.rtype,
            namespace=collection.namespace,
            label_selector=collection.label_selector,
            field_selector=collection.field_selector,
        )

    return make


# ---------------------------------------------------------------------------- pager


async def list_all(
    lw: ListerWatcher,
    *,
    resource_version: str,
    resource_version_match: str = "",
    page_size: int = ReflectorOptions.page_size,
) -> ListPage:
    """Every item of the collection and the list's RV, in pages of ``page_size`` (0: one
    unpaginated request), by the informer's pager (:func:`cacheproxy.informer.syncing.list_pages`:
    client-go's ``ListPager``, an expired continue token → one full list at the same RV). The
    result has no continue token; its items are in the server's order."""
    request = ListRequest(
        resource_version=resource_version,
        resource_version_match=resource_version_match,
        limit=max(page_size, 0),
    )
    items, rv, _ = await list_pages(lw, request)
    return ListPage(items, rv)


# ---------------------------------------------------------------------------- /version


class VersionInfo(TypedDict, total=False):
    """``version.Info`` as ``/version`` returns it."""

    major: str
    minor: str
    gitVersion: str
    gitCommit: str
    gitTreeState: str
    buildDate: str
    goVersion: str
    compiler: str
    platform: str


async def get_version(client: httpx.AsyncClient) -> VersionInfo:
    """The API server's ``/version``."""
    request = client.build_request("GET", "/version", timeout=LIST_TIMEOUT)
    body = await send_for_json(client, request)
    if not isinstance(body, dict):
        raise TransportError(f"{describe_request(request)}: expected a version object")
    return cast(VersionInfo, body)
