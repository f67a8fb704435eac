"""The server's HTTP face: a raw ASGI application on the Kubernetes API paths (DESIGN §4).

Thin handlers on purpose (raw ASGI is several times faster than a framework for the hot list,
get and watch paths). Every error is written as a ``metav1.Status`` with ``Retry-After`` when it
carries one; an unexpected exception becomes a 500 Status and a log line, never a traceback.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import orjson

from cacheproxy.errors import ApiError
from cacheproxy.informer.eventlog import TooOld
from cacheproxy.kube import discovery, status
from cacheproxy.kube.access import Attributes, ResourceAttributes, UserInfo
from cacheproxy.kube.labels import LabelSelector
from cacheproxy.kube.listoptions import ListOptions, parse_list_options
from cacheproxy.kube.request import (
    ApiPath,
    check_accepts_json,
    parse_api_path,
    split_path,
    verb_of,
    wants_pretty,
)
from cacheproxy.kube.resources import ResourceRegistry, ResourceType
from cacheproxy.kube.table import WatchTables, include_object, negotiate_table, table
from cacheproxy.kube.watchevents import event_line
from cacheproxy.server.access import AccessControl, request_attributes
from cacheproxy.server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from cacheproxy.server.metrics import ResourceStats, ServerMetrics
from cacheproxy.server.query import Query, parse_index_selector, validate_fields
from cacheproxy.server.resource import CachedResource
from cacheproxy.server.statuspage import cache_status
from cacheproxy.server.watch import ServedWatch, WatchHub, WatchPlan, stream
from cacheproxy.serving import (
    BODY_WRITER,
    RESPONSE_FLOW,
    BodyWriter,
    ResponseFlow,
    send_body,
    send_parts,
    send_status,
)
from cacheproxy.tasks import cancel_and_wait

__all__ = ["CacheServer", "ServerOptions"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

JSON = b"application/json"
_jitter = random.Random()
"""Watch-length jitter; its own generator, so serving never disturbs the global ``random``."""
READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True, slots=True)
class ServerOptions:
    watch_buffer: int = 1000
    """Lines a watcher may have pending before it is closed as too slow."""
    bookmark_interval: float = 60.0
    min_watch_timeout: float = 1800.0
    """Watches without ``timeoutSeconds`` last ``[min, 2·min)`` seconds (the API server's rule)."""
    max_watchers: int = 10_000
    max_page_size: int = 10_000
    """A larger ``limit`` is served in pages of this size (the API lets a server return fewer)."""
    max_in_flight: int = 400
    """Requests other than watches served at once; more get 429 + ``Retry-After`` (the API
    server's ``--max-requests-inflight`` default)."""
    max_watchers_per_user: int = 1_000
    """Open watches per authenticated user (all resources); more get 429."""
    max_url_bytes: int = 8_192
    """Path + query string; longer → 414."""
    max_header_bytes: int = 65_536
    """All request headers together; more → 431."""
    ready_max_staleness: float = 0.0
    """``/readyz`` fails while some resource has not heard from upstream for longer than this
    (seconds); 0: ready once synced, whatever happens upstream (the cache keeps serving)."""
    watch_stall: float = 10.0
    """A watch whose client takes no bytes for this long while events wait for it is dropped."""
    staleness_header: bool = False
    """Add ``X-Cacheproxy-Staleness-Seconds`` (seconds since upstream last moved this
    resource's cache) to list, get and watch responses."""


class CacheServer:
    """ASGI app serving the given cached resources."""

    def __init__(
        self,
        resources: Iterable[CachedResource],
        *,
        version: dict[str, Any],
        options: ServerOptions | None = None,
        server_address: str = "127.0.0.1:0",
        metrics: ServerMetrics | None = None,
        access: AccessControl | None = None,
    ) -> None:
        self.options = options or ServerOptions()
        self.access = access
        """Authentication and authorization of every request but health checks (None: open)."""
        self.in_flight = 0
        self.watchers_by_user: Counter[str] = Counter()
        self.metrics = metrics or ServerMetrics()
        self.version = version
        self.server_address = server_address
        self.resources: dict[ResourceType, CachedResource] = {}
        self.hubs: dict[ResourceType, WatchHub] = {}
        self.registry = ResourceRegistry()
        self._stats: dict[ResourceType, ResourceStats] = {}
        self._unhook: dict[ResourceType, list[Callable[[], None]]] = {}
        for res in resources:
            self.add_resource(res)
        self.draining = False
        self.watches_closed = False

    def _refusing_watches(self) -> bool:
        """``watches_closed``, read afresh: a watch checks it before and after it awaits."""
        return self.watches_closed

    def add_resource(self, res: CachedResource) -> None:
        """Serve ``res`` (at start, or when a config reload adds it)."""
        self.resources[res.rtype] = res
        self.registry.add(res.rtype)
        hub = WatchHub(res.rtype, res.store)
        self._unhook[res.rtype] = [
            res.informer.add_listener(hub.on_event),
            res.informer.add_relist_listener(hub.on_relist),
        ]
        self.hubs[res.rtype] = hub
        self._stats[res.rtype] = self.metrics.track(res, hub).stats

    def remove_resource(self, rtype: ResourceType) -> CachedResource | None:
        """Stop serving ``rtype``: its watches end (clients see the stream end, and their
        resume gets 404), it leaves discovery and the metrics."""
        res = self.resources.pop(rtype, None)
        if res is None:
            return None
        self.registry.remove(rtype)
        for unhook in self._unhook.pop(rtype, []):
            unhook()
        hub = self.hubs.pop(rtype)
        for watcher in list(hub.watchers):
            watcher.close("no longer served")
        hub.watchers.clear()
        self._stats.pop(rtype, None)
        self.metrics.untrack(res)
        return res

    @property
    def ready(self) -> bool:
        if self.draining or not all(r.synced for r in self.resources.values()):
            return False
        limit = self.options.ready_max_staleness
        return not limit or all(s.staleness() <= limit for s in self._stats.values())

    def staleness(self, rtype: ResourceType) -> float:
        """Seconds since upstream last moved ``rtype``'s cache (the status page's number)."""
        return self._stats[rtype].staleness()

    def close_watches(self, reason: str = "server shutting down") -> None:
        """End every watch, and refuse new ones from now on (a client re-watching at once
        during shutdown must not open a watch nobody will close)."""
        self.watches_closed = True
        for hub in self.hubs.values():
            for watcher in list(hub.watchers):
                watcher.close(reason)
            hub.watchers.clear()

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        req = _Request(scope, receive)
        began = time.perf_counter()
        code = 0

        async def send_recording(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        try:
            self._check_request(req, scope)
            await self._dispatch(req, send_recording)
        except ApiError as err:
            if err.code in _REJECTIONS:
                self.metrics.rejected(_REJECTIONS[err.code])
            await send_status(send_recording, err, started=req.started)
        except Exception:
            log.exception("unexpected error serving %s %s", req.method, req.path)
            await send_status(
                send_recording,
                status.internal_error("unexpected server error"),
                started=req.started,
            )
        finally:
            # Once per request, watches when they end; observe_request never raises.
            self.metrics.observe_request(
                verb=req.verb, resource=req.resource, code=code, seconds=time.perf_counter() - began
            )

    def _check_request(self, req: _Request, scope: Scope) -> None:
        """Bounds on what a request may bring (DESIGN §7): URL and header sizes, and no body on
        a read (the only requests served)."""
        url_bytes = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        if url_bytes > self.options.max_url_bytes:
            raise ApiError(
                status.status_body(
                    code=414,
                    reason="RequestURITooLong",
                    message=f"the request URI is {url_bytes} bytes long; the limit is "
                    f"{self.options.max_url_bytes}",
                )
            )
        header_bytes = sum(len(k) + len(v) for k, v in scope["headers"])
        if header_bytes > self.options.max_header_bytes:
            raise ApiError(
                status.status_body(
                    code=431,
                    reason="RequestHeaderFieldsTooLarge",
                    message=f"the request headers are {header_bytes} bytes; the limit is "
                    f"{self.options.max_header_bytes}",
                )
            )
        if req.method in ("GET", "HEAD") and (
            req.header("content-length") not in ("", "0") or req.header("transfer-encoding")
        ):
            raise status.bad_request("a request body is not allowed on a read")

    async def _dispatch(self, req: _Request, send: Send) -> None:
        parts = split_path(req.path)
        if parts in (["healthz"], ["livez"], ["readyz"]):
            # Health checks answer everyone (kubelet probes carry no credentials), as the API
            # server's system:public-info-viewer role allows.
            await self._health(send, parts[0])
            return
        path = parse_api_path(parts)
        verb = verb_of(req.method, path, req.query) if path and path.resource else None
        if self.access is not None:
            peer = req.scope_tls.get("peer_user")
            req.user = await self.access.authenticate(req.header("authorization") or None, peer)
            attrs = request_attributes(req.method, req.path, path, verb)
            try:
                await self.access.authorize(req.user, attrs)
            except ApiError as denied:
                req.namespaces = await self._readable_namespaces(req.user, attrs, path)
                if req.namespaces is None:
                    raise denied from None
        if verb == "watch" or parts in (["metrics"], ["status"]):
            # Watches are bounded by their own limits; monitoring must work under overload.
            await self._route(req, send, parts, path, verb)
            return
        if self.in_flight >= self.options.max_in_flight:
            self.metrics.rejected("in_flight")
            raise status.too_many_requests("Too many requests, please try again later.")
        self.in_flight += 1
        try:
            await self._route(req, send, parts, path, verb)
        finally:
            self.in_flight -= 1

    async def _readable_namespaces(
        self, user: UserInfo, attrs: Attributes, path: ApiPath | None
    ) -> frozenset[str] | None:
        """The namespace-filtered mode (an extension, off by default): a cluster-wide list or
        watch the user may not make is narrowed to the namespaces they may read — those that
        hold objects now; None if the mode is off, it does not apply, or no namespace is."""
        access = self.access
        if (
            access is None
            or not access.settings.namespace_filtering
            or not isinstance(attrs, ResourceAttributes)
            or attrs.verb not in ("list", "watch")
            or attrs.namespace
            or path is None
        ):
            return None
        gv = path.group_version
        rtype = self.registry.get_gvr(gv.group, gv.version, path.resource or "")
        if rtype is None or not rtype.namespaced or rtype not in self.resources:
            return None
        allowed = [
            ns
            for ns in self.resources[rtype].namespaces()
            if await access.allows(user, dataclasses.replace(attrs, namespace=ns))
        ]
        return frozenset(allowed) if allowed else None

    async def _health(self, send: Send, check: str) -> None:
        ok = check != "readyz" or self.ready
        await send_body(
            send,
            200 if ok else 503,
            b"ok" if ok else b"not ready",
            content_type=b"text/plain; charset=utf-8",
        )

    async def _route(
        self,
        req: _Request,
        send: Send,
        parts: list[str],
        path: ApiPath | None,
        verb: str | None,
    ) -> None:
        if parts == ["metrics"]:
            body = self.metrics.exposition()
            await send_body(send, 200, body, content_type=METRICS_CONTENT_TYPE)
            return
        if parts == ["status"]:
            doc = cache_status(self.metrics.tracked, ready=self.ready, now=self.metrics.clock())
            await self._send_json(req, send, orjson.dumps(doc))
            return
        if parts == ["version"]:
            await self._send_json(req, send, orjson.dumps(self.version))
            return
        if parts in (["api"], ["apis"]):
            await self._discovery_root(req, send, core=parts == ["api"])
            return
        if parts[:1] == ["apis"] and len(parts) == 2:
            versions = [gv.version for gv in self.registry.group_versions() if gv.group == parts[1]]
            if not versions:
                raise status.resource_not_found()
            doc = {
                "kind": "APIGroup",
                "apiVersion": "v1",
                **discovery.api_group(parts[1], versions),
            }
            await self._send_json(req, send, orjson.dumps(doc))
            return
        if path is None:
            raise status.resource_not_found()
        types = self.registry.in_group_version(path.group_version)
        if not types:
            raise status.resource_not_found()
        if path.resource is None:
            doc = discovery.api_resource_list(path.group_version, types, _read_verbs)
            await self._send_json(req, send, orjson.dumps(doc))
            return
        await self._resource(req, send, path, verb)

    async def _resource(self, req: _Request, send: Send, path: ApiPath, verb: str | None) -> None:
        gv = path.group_version
        rtype = self.registry.get_gvr(gv.group, gv.version, path.resource or "")
        if rtype is None or path.subresource:
            raise status.resource_not_found()
        if (path.namespace is not None and not rtype.namespaced) or (
            path.name is not None and rtype.namespaced and path.namespace is None
        ):
            raise status.resource_not_found()
        req.verb, req.resource = verb or "other", rtype.config_name
        if verb not in READ_VERBS:
            # Read-only: every write is refused as the API server refuses an unsupported verb.
            raise status.method_not_allowed(
                verb=verb or req.method.lower(), resource=rtype.resource, group=rtype.group
            )
        accept = req.header("accept")
        # Fast path: no ``as=`` parameter, no Table (only kubectl-style Accepts pay for parsing).
        as_table = negotiate_table(accept) if "as=" in accept.lower() else None
        if as_table is None:
            check_accepts_json(accept)
        include = include_object(req.query) if as_table else "Metadata"
        res = self.resources[rtype]
        if not res.synced:
            raise status.too_many_requests("storage is (re)initializing", retry_after=1)
        if self.options.staleness_header:
            send = _with_header(send, STALENESS_HEADER, f"{self.staleness(rtype):.3f}".encode())
        if verb == "get":
            assert path.name is not None
            rv = (req.query.get("resourceVersion") or [""])[0]
            opts = parse_list_options({"resourceVersion": [rv]} if rv else {})
            if opts.rv:
                await res.wait_for(opts.rv)
            entry = res.get(path.namespace, path.name)
            if as_table:
                obj = entry.object()
                doc = table(
                    res.table_printer(),
                    [obj],
                    version=as_table,
                    include=include,
                    resource_version=str(obj.get("metadata", {}).get("resourceVersion", "")),
                )
                await self._send_json(req, send, orjson.dumps(doc))
                return
            await self._send_json(req, send, entry.raw)
            return
        opts = parse_list_options(
            req.query, watch=verb == "watch", name=path.name if verb == "watch" else None
        )
        query = self._query(res, path.namespace, opts, req)
        if verb == "list":
            if opts.limit > self.options.max_page_size:
                opts = dataclasses.replace(opts, limit=self.options.max_page_size)
            page = await res.list(query, opts)
            if as_table:
                doc = table(
                    res.table_printer(),
                    [e.object() for e in page.items],
                    version=as_table,
                    include=include,
                    resource_version=str(page.resource_version),
                    continue_token=page.continue_token,
                    remaining=page.remaining,
                )
                await self._send_json(req, send, orjson.dumps(doc))
                return
            if req.pretty:
                await self._send_json(req, send, page.body())
                return
            parts = page.parts()
            req.started = True  # past here a failure can only end the response
            await send_parts(send, parts, writer=req.writer)
            return
        tables = (
            WatchTables(res.table_printer(), version=as_table, include=include)
            if as_table
            else None
        )
        await self._watch(req, send, res, query, opts, tables)

    def _query(
        self, res: CachedResource, namespace: str | None, opts: ListOptions, req: _Request
    ) -> Query:
        fields = validate_fields(res.rtype, opts.field_selector, res.index_paths)
        index_text = (req.query.get("indexSelector") or [""])[0]
        index = (
            parse_index_selector(index_text, res.index_paths)
            if index_text
            else LabelSelector.EVERYTHING
        )
        return Query(
            namespace=namespace,
            labels=opts.label_selector,
            fields=fields,
            index=index,
            namespaces=req.namespaces,
        )

    async def _watch(
        self,
        req: _Request,
        send: Send,
        res: CachedResource,
        query: Query,
        opts: ListOptions,
        tables: WatchTables | None = None,
    ) -> None:
        hub = self.hubs[res.rtype]
        if len(hub.watchers) >= self.options.max_watchers:
            self.metrics.rejected("watchers")
            raise status.too_many_requests("too many watches on this resource", retry_after=1)
        user = req.user.name if req.user is not None else ""
        if user and self.watchers_by_user[user] >= self.options.max_watchers_per_user:
            self.metrics.rejected("watchers_per_user")
            raise status.too_many_requests(
                f"too many watches by this user (limit {self.options.max_watchers_per_user})",
                retry_after=1,
            )
        self.watchers_by_user[user] += 1
        try:
            await self._watch_stream(req, send, res, query, opts, tables)
        finally:
            self.watchers_by_user[user] -= 1
            if self.watchers_by_user[user] <= 0:
                del self.watchers_by_user[user]

    async def _watch_stream(
        self,
        req: _Request,
        send: Send,
        res: CachedResource,
        query: Query,
        opts: ListOptions,
        tables: WatchTables | None,
    ) -> None:
        hub = self.hubs[res.rtype]
        requested = opts.rv
        if opts.send_initial_events and requested > res.resource_version:
            # A watch-list's initial state must be at least this fresh: the API server waits
            # (3 s) for its cache, then refuses. A plain watch from a newer RV simply waits for
            # the events after it (clients behind several replicas rely on that).
            await res.wait_for(requested)  # 504 before the stream starts
        if self._refusing_watches():
            raise status.service_unavailable("the server is shutting down", retry_after=1)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", JSON), (b"cache-control", b"no-cache, private")],
            }
        )
        req.started = True
        # Synchronous from here to hub.add: nothing can be applied in between, so the watcher
        # gets exactly the events after its starting point.
        initial = []
        replay: list[bytes] = []
        end_bookmark: int | None = None
        send_initial = opts.send_initial_events or (
            opts.send_initial_events is None and opts.resource_version in ("", "0")
        )
        if send_initial:
            initial = [res.store.get(k) for k in res.current_keys(query)]
            if opts.send_initial_events and opts.allow_watch_bookmarks:
                end_bookmark = res.resource_version
        elif opts.resource_version not in ("", "0") and requested <= res.resource_version:
            try:
                events = res.informer.event_log.since(requested)
            except TooOld as too_old:
                line = event_line(
                    "ERROR",
                    orjson.dumps(
                        status.too_old_resource_version(too_old.requested, too_old.oldest).status
                    ),
                )
                if tables is not None:
                    line = tables.convert(line)
                await send({"type": "http.response.body", "body": line, "more_body": False})
                return
            replay = _replay_lines(hub, events, query)
        if self._refusing_watches():  # shutting down since the response began: end it now
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        writer = req.writer if tables is None else None
        watcher = ServedWatch(
            query,
            buffer=self.options.watch_buffer,
            min_rv=max(res.resource_version, requested),
            bookmarks=opts.allow_watch_bookmarks,
        )
        hub.add(watcher)
        timeout = (
            float(opts.timeout_seconds)
            if opts.timeout_seconds
            else self.options.min_watch_timeout * (1 + _jitter.random())
        )
        plan = WatchPlan(
            initial=[e for e in initial if e is not None],
            replay=replay,
            end_bookmark_rv=end_bookmark,
            allow_bookmarks=opts.allow_watch_bookmarks,
            timeout=timeout,
            bookmark_interval=self.options.bookmark_interval,
        )
        disconnect = asyncio.create_task(req.wait_disconnect(), name="watch-disconnect")
        disconnect.add_done_callback(lambda _: watcher.close("client went away"))
        flow, stall = req.flow, self.options.watch_stall
        try:
            async for parts in stream(
                watcher, plan, res.rtype, current_rv=lambda: res.resource_version
            ):
                # A client that takes nothing for `stall` seconds while events wait for it is
                # dropped, as the API server drops watchers that do not keep up: its buffer is
                # bounded, and so is the time it may hold up its events.
                if flow is not None and not await flow.writable(stall):
                    hub.evict(watcher, f"took nothing for {stall:g} s")
                    flow.abort()
                    return
                if writer is not None:  # the lines as they are: no join, no re-framing copy
                    await writer.write_chunk(parts)
                    continue
                chunk = b"".join(parts)
                if tables is not None:
                    chunk = tables.convert(chunk)
                    if not chunk:
                        continue
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            hub.remove(watcher)
            await cancel_and_wait(disconnect)
        if flow is not None and not await flow.writable(stall):
            flow.abort()  # evicted (buffer full) and still taking nothing: no clean end either
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    # ------------------------------------------------------------------ discovery

    async def _discovery_root(self, req: _Request, send: Send, *, core: bool) -> None:
        gvs = [gv for gv in self.registry.group_versions() if (gv.group == "") == core]
        version = discovery.negotiate_aggregated(req.header("accept"))
        if version is not None:
            doc = discovery.aggregated_discovery(
                gvs, self.registry.in_group_version, _read_verbs, version=version
            )
            await self._send_json(
                req,
                send,
                orjson.dumps(doc),
                content_type=discovery.aggregated_content_type(version).encode(),
            )
            return
        check_accepts_json(req.header("accept"))
        doc = discovery.api_versions(self.server_address) if core else discovery.api_group_list(gvs)
        await self._send_json(req, send, orjson.dumps(doc))

    async def _send_json(
        self, req: _Request, send: Send, body: bytes, *, content_type: bytes = JSON
    ) -> None:
        if req.pretty:
            body = orjson.dumps(orjson.loads(body), option=orjson.OPT_INDENT_2) + b"\n"
        await send_body(send, 200, body, content_type=content_type)
        req.started = True


_REJECTIONS = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    414: "url_too_long",
    431: "headers_too_large",
}
"""Refusals counted in ``cacheproxy_http_rejected_total{reason}`` (429s where raised, by cause)."""


STALENESS_HEADER = b"x-cacheproxy-staleness-seconds"


def _with_header(send: Send, name: bytes, value: bytes) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), (name, value)]}
        await send(message)

    return sending


def _read_verbs(rtype: ResourceType) -> list[str]:
    return list(READ_VERBS)


def _replay_lines(hub: WatchHub, events: Iterable[Any], query: Query) -> list[bytes]:
    """History after the requested RV, as this query sees it (the transition rule)."""
    probe = ServedWatch(query, buffer=1 << 62)
    probe_hub = WatchHub(hub.rtype, hub.store)
    probe_hub.add(probe)
    for event in events:
        probe_hub.on_event(event)
    return probe.take()


class _Request:
    __slots__ = (
        "_headers",
        "_receive",
        "flow",
        "method",
        "namespaces",
        "path",
        "pretty",
        "query",
        "resource",
        "scope_tls",
        "started",
        "user",
        "verb",
        "writer",
    )

    def __init__(self, scope: Scope, receive: Receive) -> None:
        self._receive = receive
        extensions = scope.get("extensions") or {}
        self.scope_tls: dict[str, Any] = extensions.get("tls") or {}
        self.writer: BodyWriter | None = extensions.get(BODY_WRITER)
        self.flow: ResponseFlow | None = extensions.get(RESPONSE_FLOW)
        self.user: UserInfo | None = None
        self.namespaces: frozenset[str] | None = None
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.query: dict[str, list[str]] = parse_qs(
            scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True
        )
        self._headers: dict[str, str] = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
        }
        self.pretty = wants_pretty(self.query, self.header("user-agent"))
        self.started = False
        # The metrics' labels: set once the request is known to be on a served resource.
        self.verb = "get" if self.method in ("GET", "HEAD") else "other"
        self.resource = ""

    def header(self, name: str) -> str:
        return self._headers.get(name, "")

    async def wait_disconnect(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                return
