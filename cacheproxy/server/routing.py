"""Which handler answers a request: a route table (docs/design.md §4).

The server hands each admitted request over as a :class:`Call` to its :class:`RouteTable`: the
routes are tried in order, each matched by the path's shape and answered by a small handler
built with only what it uses (the metrics' exposition, the status document, upstream's
``/version``…; the resource reads, :class:`ResourceReads`, with the resources, the read
planner's choices and the watch limits). No handler holds the server.

In order: health checks, cacheproxy's own API (``/cacheproxy/``), ``/metrics``, ``/status``,
the home page for a browser at ``/``, ``/openapi/…``, ``/version``, discovery, then the
Kubernetes API paths of the cached resources. A resource path is checked against what is served
— its type, its scope (a namespaced path for a cluster-scoped resource is a 404, as on the API
server); writes were refused or passed through before (:mod:`.refusals`, :mod:`.passthrough`)
— and then answered by get, list (:mod:`.reads`) or watch (:mod:`.watching`), before the first
sync with a 429 and ``Retry-After``. What a read is answered from — the cache now, an older
state, or upstream — is the read planner's (:mod:`.readplan`), carried out by
:func:`.readexec.decide`; the route only dispatches on the answer. A path outside the API
is a 404 naming what is served.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.listoptions import ListOptions, parse_list_options
from cacheproxy.kube.request import ApiPath
from cacheproxy.kube.resources import ResourceRegistry, ResourceType
from cacheproxy.kube.table import WatchTables
from cacheproxy.server.admission import Admission, ServedRequest
from cacheproxy.server.consistent import ObjectKey, warning_header
from cacheproxy.server.failures import UpstreamFailures
from cacheproxy.server.history import History
from cacheproxy.server.homepage import HTML, wants_html
from cacheproxy.server.homepage import render as render_home
from cacheproxy.server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from cacheproxy.server.openapi import OpenApiDocuments
from cacheproxy.server.options import JSON_ANSWERS, ServerOptions
from cacheproxy.server.ownapi import PREFIX, USER
from cacheproxy.server.query import Query
from cacheproxy.server.readexec import decide
from cacheproxy.server.readplan import ForwardRead, ReadRequest, Serve
from cacheproxy.server.reads import ResponseForm, build_query, negotiate, serve_get, serve_list
from cacheproxy.server.refusals import not_cached, not_served_here
from cacheproxy.server.resource import ServedResource
from cacheproxy.server.watchhub import WatchHub
from cacheproxy.server.watching import serve_watch
from cacheproxy.serving import Message, Receive, Scope, Send, send_body, with_header
from cacheproxy.serving.discoveryroutes import Discovery

__all__ = [
    "HEALTH_CHECKS",
    "OWN_PATHS",
    "STALENESS_HEADER",
    "Call",
    "ResourceReads",
    "Route",
    "RouteTable",
    "api_paths",
    "health",
    "home_page",
    "metrics",
    "own_api",
    "status_document",
    "upstream_version",
]

HEALTH_CHECKS = (["healthz"], ["livez"], ["readyz"])
STALENESS_HEADER = b"x-cacheproxy-staleness-seconds"
OWN_API = [PREFIX.strip("/")]
OWN_PATHS = (OWN_API, ["metrics"], ["status"], ["version"])
"""Paths (their first segment) the daemon answers itself, with pass-through on too (with
health checks and the home page)."""


@dataclass(slots=True)
class Call:
    """One request as the routes see it: the request, where its answer goes, its path split
    (``parts``) and parsed as an API path (``path``, None outside the API), and its verb."""

    req: ServedRequest
    send: Send
    parts: list[str]
    path: ApiPath | None
    verb: str | None


Handler = Callable[[Call], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Route:
    """A handler and the calls it answers."""

    name: str
    matches: Callable[[Call], bool]
    handle: Handler


class RouteTable:
    """The routes, tried in order; ``last`` answers what none matched."""

    def __init__(self, routes: Sequence[Route], *, last: Handler) -> None:
        self.routes = tuple(routes)
        self.last = last

    async def dispatch(self, call: Call) -> None:
        for route in self.routes:
            if route.matches(call):
                await route.handle(call)
                return
        await self.last(call)


# ---------------------------------------------------------------------------- the routes


def health(ready: Callable[[], bool], report: Callable[[bool], str]) -> Route:
    """``/healthz``, ``/livez``, ``/readyz``; with ``?verbose`` (as the API server's) the
    readiness ``report``: a line per check."""

    async def handle(call: Call) -> None:
        check = call.parts[0]
        ok = check != "readyz" or ready()
        body = b"ok" if ok else b"not ready"
        if "verbose" in call.req.query and check == "readyz":
            body = report(ok).encode()
        status_code = 200 if ok else 503
        await send_body(call.send, status_code, body, content_type=b"text/plain; charset=utf-8")

    return Route("health", lambda call: call.parts in HEALTH_CHECKS, handle)


def own_api(api: Callable[[Scope, Receive, Send], Awaitable[None]]) -> Route:
    """cacheproxy's own API (FastAPI, :mod:`.ownapi`), with the request's user."""

    async def handle(call: Call) -> None:
        req, send = call.req, call.send

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                req.started = True
            await send(message)

        await api({**req.scope, USER: req.user}, req.receive, sending)

    return Route("own API", lambda call: call.parts[:1] == OWN_API, handle)


def metrics(exposition: Callable[[], bytes]) -> Route:
    async def handle(call: Call) -> None:
        await send_body(call.send, 200, exposition(), content_type=METRICS_CONTENT_TYPE)

    return Route("metrics", lambda call: call.parts == ["metrics"], handle)


def status_document(document: Callable[[], dict[str, Any]]) -> Route:
    async def handle(call: Call) -> None:
        await JSON_ANSWERS.send(call.send, call.req, orjson.dumps(document()))

    return Route("status", lambda call: call.parts == ["status"], handle)


def home_page(
    document: Callable[[], dict[str, Any]],
    *,
    version: Mapping[str, Any],
    api_server: str,
    history: History,
) -> Route:
    """The dashboard (:mod:`.homepage`) for a browser at ``/``."""

    async def handle(call: Call) -> None:
        html = render_home(document(), version=version, api_server=api_server, history=history)
        await send_body(call.send, 200, html, content_type=HTML, headers=[(b"vary", b"Accept")])

    def matches(call: Call) -> bool:
        return not call.parts and wants_html(call.req.header("accept"))

    return Route("home page", matches, handle)


def openapi(documents: OpenApiDocuments) -> Route:
    async def handle(call: Call) -> None:
        await documents.serve(call.req, call.send, call.parts)

    return Route("openapi", lambda call: call.parts[:1] == ["openapi"], handle)


def upstream_version(version: Mapping[str, Any]) -> Route:
    async def handle(call: Call) -> None:
        await JSON_ANSWERS.send(call.send, call.req, orjson.dumps(version))

    return Route("version", lambda call: call.parts == ["version"], handle)


class ServerAddress(Protocol):
    @property
    def server_address(self) -> str: ...


def api_paths(
    discovery: Discovery,
    registry: ResourceRegistry,
    reads: ResourceReads,
    *,
    served_at: ServerAddress,
) -> Handler:
    """What is left: discovery (the group lists, and a group version's resources), the reads of
    the cached resources, and a 404 for everything else."""

    async def handle(call: Call) -> None:
        req, send, parts, path = call.req, call.send, call.parts, call.path
        if await discovery.serve_groups(req, send, parts, server_address=served_at.server_address):
            return
        if path is None:
            if parts[:1] in (["api"], ["apis"]):
                raise status.resource_not_found()
            raise not_served_here(req.path)
        types = registry.in_group_version(path.group_version)
        if not types:
            raise reads.not_found(path)
        if path.resource is None:
            await discovery.send(req, send, discovery.resources(path.group_version, types))
            return
        await reads.serve(call)

    return handle


# ---------------------------------------------------------------------------- resource reads


class ReadForwarding(Protocol):
    """How a read the planner sends upstream gets there (the server's pass-through)."""

    def can_forward(self, req: ServedRequest) -> bool: ...

    async def forward_read(
        self,
        req: ServedRequest,
        send: Send,
        parts: list[str],
        path: ApiPath,
        verb: str | None,
    ) -> None: ...


@dataclass(slots=True)
class ResourceReads:
    """Gets, lists and watches of the cached resources: what answers them and what bounds them."""

    registry: ResourceRegistry
    resources: Mapping[ResourceType, ServedResource]
    hubs: Mapping[ResourceType, WatchHub]
    options: ServerOptions
    admission: Admission
    failures: UpstreamFailures
    forwarding: ReadForwarding
    staleness: Callable[[ResourceType], float]
    refusing_watches: Callable[[], bool]
    """True once the server refuses new watches (shutting down)."""
    passthrough: bool
    api_server: str

    async def serve(self, call: Call) -> None:
        req, send, parts, path, verb = call.req, call.send, call.parts, call.path, call.verb
        assert path is not None
        res, form = self._served(req, path, verb)
        if self.options.staleness_header:
            staleness = f"{self.staleness(res.rtype):.3f}".encode()
            send = with_header(send, STALENESS_HEADER, staleness)
        can_forward = self.forwarding.can_forward(req)
        if form.table is not None and not res.prints_tables and can_forward:
            # Columns only upstream knows: its Table, as it prints it (the caller's RV kept).
            await self.forwarding.forward_read(req, send, parts, path, verb)
            return
        if verb == "get":
            assert path.name is not None
            given = req.param("resourceVersion")
            if given and given != "0":
                # A bad RV: the API server's 400.
                parse_list_options({"resourceVersion": [given]}, kube=res.kube_version())
            get = ObjectKey(path.namespace, path.name, res.key_of(path.namespace, path.name))
            answer = await decide(res, ReadRequest("get", given), get=get, can_forward=can_forward)
            if isinstance(answer, ForwardRead):
                await self.forwarding.forward_read(req, send, parts, path, verb)
                return
            await serve_get(
                req,
                _warned(send, answer),
                res,
                namespace=path.namespace,
                name=path.name,
                form=form,
                compression=self.options.compression,
            )
            return
        opts = parse_list_options(
            req.query,
            watch=verb == "watch",
            name=path.name if verb == "watch" else None,
            kube=res.kube_version(),
        )
        query = build_query(req, res, path.namespace, opts)
        read = ReadRequest.of("watch" if verb == "watch" else "list", opts, kube=res.kube_version())
        answer = await decide(res, read, can_forward=can_forward, opts=opts)
        if isinstance(answer, ForwardRead):
            await self.forwarding.forward_read(req, send, parts, path, verb)
            return
        send = _warned(send, answer)
        if verb == "list":
            await serve_list(
                req,
                send,
                res,
                query=query,
                opts=opts,
                form=form,
                max_page_size=self.options.max_page_size,
                at=answer.at,
                compression=self.options.compression,
            )
            return
        await self._watch(req, send, res, query, opts, form)

    async def _watch(
        self,
        req: ServedRequest,
        send: Send,
        res: ServedResource,
        query: Query,
        opts: ListOptions,
        form: ResponseForm,
    ) -> None:
        """A watch, counted against its resource's and its user's limits while it lasts."""
        tables = (
            WatchTables(res.table_printer(), version=form.table, include=form.include)
            if form.table
            else None
        )
        hub = self.hubs[res.rtype]
        user = self.admission.admit_watch(req, len(hub.watchers))
        try:
            await serve_watch(
                req,
                send,
                res=res,
                hub=hub,
                query=query,
                opts=opts,
                tables=tables,
                options=self.options,
                refusing=self.refusing_watches,
            )
        finally:
            self.admission.release_watch(user)

    def not_found(self, path: ApiPath) -> ApiError:
        """404 for a path naming a resource that is not cached: with pass-through off (where
        such reads end here), a message saying how to serve it; otherwise the API server's
        own."""
        if path.resource is None or self.passthrough:
            return status.resource_not_found()
        cached = sorted(rtype.config_name for rtype in self.resources)
        return not_cached(path, cached, api_server=self.api_server)

    def _served(
        self, req: ServedRequest, path: ApiPath, verb: str | None
    ) -> tuple[ServedResource, ResponseForm]:
        """The cached resource a read of ``path`` is answered from, and the answer's form; 404
        for what is not served, 406 for an answer nobody accepts, 429 before the resource's
        first sync. (Writes were refused before: :mod:`.refusals`.)"""
        gv = path.group_version
        rtype = self.registry.get_gvr(gv.group, gv.version, path.resource or "")
        if rtype is None and not path.subresource:
            raise self.not_found(path)
        if rtype is None or path.subresource:
            raise status.resource_not_found()
        if (path.namespace is not None and not rtype.namespaced) or (
            path.name is not None and rtype.namespaced and path.namespace is None
        ):
            raise status.resource_not_found()
        req.verb, req.resource = verb or "other", rtype.config_name
        res = self.resources[rtype]
        res.last_read = time.monotonic()
        form = negotiate(req, keeps_managed_fields=res.keeps_managed_fields)
        if not res.synced:
            failure = self.failures.of(rtype.config_name)
            why = f": {rtype.config_name} is not synced yet ({failure.summary})" if failure else ""
            raise status.too_many_requests(f"storage is (re)initializing{why}", retry_after=1)
        return res, form


def _warned(send: Send, answer: Serve) -> Send:
    """``send``, with a ``Warning`` header when a read with ``resourceVersion`` unset is served
    from the cache as it is though its freshness could not be proven."""
    if answer.warning is None:
        return send
    return with_header(send, b"warning", warning_header(answer.warning))
