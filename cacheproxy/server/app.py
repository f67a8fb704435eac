"""The server's HTTP face: a raw ASGI application on the Kubernetes API paths (docs/design.md §4).

Thin handlers on purpose (raw ASGI is several times faster than a framework for the hot list,
get and watch paths). A request meets, in order:

1. its bounds, then health checks (answered for everyone, as the API server's
   ``system:public-info-viewer`` role allows kubelet probes without credentials);
2. authentication and authorization, and the in-flight limit (:mod:`.admission`);
3. its handler (:mod:`.routing` → :mod:`.reads` for get and list, :mod:`.watching` for watch,
   discovery from :mod:`cacheproxy.serving`).

Every error is written as a ``metav1.Status`` with ``Retry-After`` when it carries one; an
unexpected exception becomes a 500 Status and a log line, never a traceback
(:func:`cacheproxy.serving.send_error`). Each request is measured once, watches when they end.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from cacheproxy.errors import ApiError
from cacheproxy.kube.attributes import UserInfo
from cacheproxy.kube.listoptions import parse_list_options
from cacheproxy.kube.protobuf import accepts_only_protobuf
from cacheproxy.kube.request import ApiPath, parse_api_path, split_path, verb_of
from cacheproxy.kube.resources import ResourceRegistry, ResourceType
from cacheproxy.kube.versions import NEWEST, KubeVersion
from cacheproxy.server.access import AccessControl
from cacheproxy.server.admission import Admission, ServedRequest
from cacheproxy.server.failures import fix_for
from cacheproxy.server.forwarded import UpstreamRead
from cacheproxy.server.history import History
from cacheproxy.server.homepage import wants_html
from cacheproxy.server.metrics import ResourceStats, ServerMetrics
from cacheproxy.server.openapi import OpenApiDocuments, OpenApiSource
from cacheproxy.server.options import JSON_ANSWERS, READ_VERBS, ServerOptions, read_verbs
from cacheproxy.server.ownapi import LazyApi
from cacheproxy.server.passthrough import (
    LONG_RUNNING_SUBRESOURCES,
    WRITE_VERBS,
    Forward,
    PassThrough,
)
from cacheproxy.server.proxying import tunnelled_upgrade
from cacheproxy.server.query import Query, validate_fields
from cacheproxy.server.refusals import refusal, websocket_refusal
from cacheproxy.server.resource import ServedResource
from cacheproxy.server.routing import (
    HEALTH_CHECKS,
    OWN_PATHS,
    Call,
    ResourceReads,
    Route,
    RouteTable,
    api_paths,
    health,
    home_page,
    metrics,
    openapi,
    own_api,
    status_document,
    upstream_version,
)
from cacheproxy.server.settling import SETTLED_SUBRESOURCES
from cacheproxy.server.statuspage import cache_status
from cacheproxy.server.watchhub import QueuedBytes, WatchHub
from cacheproxy.serving import (
    Discovery,
    Message,
    Receive,
    Scope,
    Send,
    send_error,
    send_status,
    websocket_denial,
    with_header,
)

__all__ = ["CacheServer", "ServerOptions"]

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOP_READS = 10
"""Resources the status page lists as read upstream, not cached."""

log = logging.getLogger(__name__)


class CacheServer:
    """ASGI app serving the given cached resources."""

    def __init__(
        self,
        resources: Iterable[ServedResource],
        *,
        version: dict[str, Any],
        options: ServerOptions | None = None,
        server_address: str = "127.0.0.1:0",
        metrics: ServerMetrics | None = None,
        access: AccessControl | None = None,
        api_server: str = "",
        configuration: Callable[[], Mapping[str, Any]] | None = None,
        openapi: OpenApiSource | None = None,
        passthrough: PassThrough | None = None,
        local_tokens: bool = False,
    ) -> None:
        self.options = options or ServerOptions()
        self.api_server = api_server
        """The upstream API server's URL, named in refusals as where to send what the cache
        cannot serve ("" when unknown)."""
        self.metrics = metrics or ServerMetrics()
        self.started_at = self.metrics.clock()
        self.history = History(self.metrics)
        """The last minutes of each resource (the home page's charts); sampling runs between
        :meth:`History.start` and :meth:`History.stop` (the daemon's)."""
        self.admission = Admission(self.options, self.metrics, access)
        self.version = version
        self._version_text: str | None = None
        self._kube_version = NEWEST
        self.server_address = server_address
        self.resources: dict[ResourceType, ServedResource] = {}
        self.hubs: dict[ResourceType, WatchHub] = {}
        self.watch_bytes = QueuedBytes(self.options.watch_buffers_total_bytes)
        """The lines queued for all watchers, of every resource (each counted once), and their
        bound."""
        self.registry = ResourceRegistry()
        self.discovery = Discovery(
            group_versions=self.registry.group_versions,
            types_in=self.registry.in_group_version,
            verbs_for=read_verbs,
            answers=JSON_ANSWERS,
            kube=lambda: self.kube_version,
        )
        self._stats: dict[ResourceType, ResourceStats] = {}
        self._unhook: dict[ResourceType, list[Callable[[], None]]] = {}
        for res in resources:
            self.add_resource(res)
        self.openapi = (
            OpenApiDocuments(openapi, served=self.registry.group_versions) if openapi else None
        )
        """Upstream's OpenAPI documents, served at ``/openapi/…`` (None: not served)."""
        self.api: ASGIApp = LazyApi(self, configuration=configuration)
        """cacheproxy's own API (:mod:`.ownapi`): handed only paths under ``/cacheproxy/``; built
        on its first request (FastAPI is not imported before: a start reaches ready sooner)."""
        self.draining = False
        self.pending: dict[str, str] = {}
        """Configured resources not served yet (by config name), and why: the server is not
        ready while there is one."""
        self.watches_closed = False
        """Set by :meth:`close_watches`: new watches are refused (503) from then on."""
        self.passthrough = passthrough
        """Forwards what the cache does not answer (:mod:`.passthrough`); None: refused, as a
        read-only cache (:mod:`.refusals`)."""
        self.auto_cached: set[str] = set()
        """Resources cached because they were read through pass-through (by config name)."""
        self.local_tokens = local_tokens
        """Bearer tokens are checked against a static token file of the daemon's (``auth.mode:
        token``): they are not the API server's, so a forwarded request cannot carry them."""
        self.routes = self._route_table()
        """Which handler answers an admitted request (:mod:`.routing`)."""

    def _route_table(self) -> RouteTable:
        reads = ResourceReads(
            registry=self.registry,
            resources=self.resources,
            hubs=self.hubs,
            options=self.options,
            admission=self.admission,
            failures=self.metrics.failures,
            forwarding=self,
            staleness=self.staleness,
            refusing_watches=lambda: self.watches_closed,
            passthrough=self.passthrough is not None,
            api_server=self.api_server,
        )
        routes: list[Route] = [
            health(lambda: self.ready, self.readiness_report),
            own_api(lambda scope, receive, send: self.api(scope, receive, send)),
            metrics(self.metrics.exposition),
            status_document(self.status_page),
            home_page(
                self.status_page,
                version=self.version,
                api_server=self.api_server,
                history=self.history,
            ),
        ]
        if self.openapi is not None:
            routes.append(openapi(self.openapi))
        routes.append(upstream_version(self.version))
        return RouteTable(
            routes, last=api_paths(self.discovery, self.registry, reads, served_at=self)
        )

    @property
    def kube_version(self) -> KubeVersion:
        """The upstream API server's version (its ``/version``; the newest known until read):
        what is answered as that version answers it (Tables, watch-lists)."""
        text = self.version.get("gitVersion", "")
        if text != self._version_text:
            self._version_text, self._kube_version = text, KubeVersion.of(self.version)
        return self._kube_version

    @property
    def access(self) -> AccessControl | None:
        """Authentication and authorization of every request but health checks (None: open)."""
        return self.admission.access

    @property
    def in_flight(self) -> int:
        """Requests other than watches being served now."""
        return self.admission.in_flight

    @property
    def watchers_by_user(self) -> Counter[str]:
        """Open watches per user ("" for unauthenticated)."""
        return self.admission.watchers_by_user

    def add_resource(self, res: ServedResource) -> None:
        """Serve ``res`` (at start, or when a config reload adds it)."""
        self.resources[res.rtype] = res
        res.kube_version = lambda: self.kube_version
        self.registry.add(res.rtype)
        hub = WatchHub(res.rtype, res.store, budget=self.watch_bytes)
        hub.kube_version = lambda: self.kube_version
        self._unhook[res.rtype] = [res.informer.subscribe(hub.observe)]
        self.hubs[res.rtype] = hub
        self._stats[res.rtype] = self.metrics.track(res, hub).stats

    def describe(self, rtype: ResourceType) -> None:
        """Describe a served resource anew in discovery (a custom resource's short names,
        categories and storage version hash, once upstream's discovery gave them)."""
        if rtype in self.resources:
            self.registry.add(rtype)

    def remove_resource(self, rtype: ResourceType) -> ServedResource | None:
        """Stop serving ``rtype``: its watches end (clients see the stream end, and their
        resume gets 404), it leaves discovery and the metrics."""
        res = self.resources.pop(rtype, None)
        if res is None:
            return None
        self.registry.remove(rtype)
        for unhook in self._unhook.pop(rtype, []):
            unhook()
        self.hubs.pop(rtype).close_all("no longer served")
        self._stats.pop(rtype, None)
        self.metrics.untrack(res)
        return res

    @property
    def ready(self) -> bool:
        if self.draining or self.pending:
            return False
        auto = self.auto_cached
        if not all(r.synced for t, r in self.resources.items() if t.config_name not in auto):
            return False
        limit = self.options.ready_max_staleness
        return not limit or all(s.staleness() <= limit for s in self._stats.values())

    def readiness_report(self, ok: bool) -> str:
        """``/readyz?verbose``: a line per check, as the API server's: ``[+]cache:pods ok``,
        ``[-]cache:pods not synced: list failed: 403 … (fix)``."""
        failures = self.metrics.failures
        lines = ["[+]ping ok"] if not self.draining else ["[-]shutting down"]
        for name, why in self.pending.items():
            lines.append(f"[-]cache:{name} not served: {why}")
        for rtype, res in self.resources.items():
            name = rtype.config_name
            failure = failures.of(name)
            if res.synced and failure is None:
                lines.append(f"[+]cache:{name} ok")
                continue
            state = "synced, but failing" if res.synced else "not synced"
            if name in self.auto_cached and not res.synced:
                state = "not synced (cached because read: not needed for readiness)"
            reason = (
                f": {failure.summary}. {fix_for(failure.code, failure.verb, name)}"
                if failure
                else ""
            )
            lines.append(f"[{'+' if res.synced else '-'}]cache:{name} {state}{reason}")
        lines.append(f"readyz check {'passed' if ok else 'failed'}")
        return "\n".join(lines) + "\n"

    def status_page(self) -> dict[str, Any]:
        """The status document of ``/status``, the home page and the own API."""
        metrics = self.metrics
        passthrough = self.passthrough
        return cache_status(
            metrics.tracked,
            ready=self.ready,
            now=metrics.clock(),
            pending=self.pending,
            read_upstream=passthrough.reads.top(TOP_READS) if passthrough is not None else None,
            auto_cached=self.auto_cached,
            failures=metrics.failures,
            history=self.history,
            upstream=self.api_server,
            upstream_version=self.version,
            uptime=metrics.clock() - self.started_at,
        )

    def staleness(self, rtype: ResourceType) -> float:
        """Seconds since upstream last moved ``rtype``'s cache (the status page's number)."""
        return self._stats[rtype].staleness()

    def close_watches(self, reason: str = "server shutting down") -> None:
        """End every watch — the cache's and those passed through, with the other long-running
        requests passed through (logs, exec, port-forward) — and refuse new ones from now on (a
        client re-watching at once during shutdown must not open a watch nobody will close)."""
        self.watches_closed = True
        for hub in self.hubs.values():
            hub.close_all(reason)
        if self.passthrough is not None:
            self.passthrough.end_long_running()

    def served_namespaces(self, path: ApiPath) -> list[str] | None:
        """The namespaces holding objects of ``path``'s resource now, in order (None when it is
        not a served namespaced resource)."""
        gv = path.group_version
        rtype = self.registry.get_gvr(gv.group, gv.version, path.resource or "")
        if rtype is None or not rtype.namespaced or rtype not in self.resources:
            return None
        return self.resources[rtype].namespaces()

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await self._refuse_websocket(scope, receive, send)
            return
        req = ServedRequest(scope, receive)
        began = time.perf_counter()
        recording = _CodeRecording(send)
        try:
            await self._serve(req, recording)
        except Exception as exc:
            if isinstance(exc, ApiError):
                self.admission.count_rejection(exc)
            await send_error(req, recording, exc, logger=log)
        finally:
            # Once per request, watches when they end; observe_request never raises.
            self.metrics.observe_request(
                verb=req.verb,
                resource=req.resource,
                code=recording.code,
                seconds=time.perf_counter() - began,
            )

    async def _refuse_websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A websocket request: refused with a Status (the cache serves nothing over a
        websocket), sent as the server's denial response."""
        req = ServedRequest({**scope, "method": "GET"}, receive)
        recording = _CodeRecording(websocket_denial(scope, send))
        try:
            self.admission.check_bounds(req)
            path = parse_api_path(split_path(req.path))
            self._label(req, path, "other")
            await self.admission.authenticate(req)
            raise websocket_refusal(req, path, api_server=self.api_server)
        except Exception as exc:
            await send_error(req, recording, exc, logger=log)
        finally:
            self.metrics.observe_request(
                verb="other", resource=req.resource, code=recording.code, seconds=0
            )

    def _label(self, req: ServedRequest, path: ApiPath | None, verb: str | None) -> None:
        """The request metrics' labels of a refused request on a served resource."""
        if path is not None and path.resource is not None:
            gv = path.group_version
            rtype = self.registry.get_gvr(gv.group, gv.version, path.resource)
            if rtype is not None:
                req.verb, req.resource = verb or "other", rtype.config_name

    async def _serve(self, req: ServedRequest, send: Send) -> None:
        admission = self.admission
        admission.check_bounds(req)
        parts = split_path(req.path)
        if parts in HEALTH_CHECKS:
            await self.routes.dispatch(Call(req, send, parts, None, None))
            return
        path = parse_api_path(parts)
        verb = verb_of(req.method, path, req.query) if path and path.resource else None
        if self.passthrough is not None and not self._answers(req, parts, path):
            await self._forward(self.passthrough, req, send, parts, path, verb)
            return
        refused = refusal(req, path, verb, api_server=self.api_server)
        if refused is not None:
            # Refused whoever asks: only who asks is checked (401), not what they may do.
            self._label(req, path, verb)
            await admission.authenticate(req)
            if req.header("upgrade"):
                # The server's parser is past the upgrade offer: no request follows on this
                # connection.
                send = with_header(send, b"connection", b"close")
            protobuf = accepts_only_protobuf(req.header("accept"))
            await send_status(send, refused, started=False, protobuf=protobuf)
            return
        if admission.access is not None:
            await admission.authorize(req, path, verb, served_namespaces=self.served_namespaces)
        if verb == "watch" or parts in (["metrics"], ["status"]):
            # Watches are bounded by their own limits; monitoring must work under overload.
            await self.routes.dispatch(Call(req, send, parts, path, verb))
            return
        admission.admit()
        try:
            await self.routes.dispatch(Call(req, send, parts, path, verb))
        finally:
            admission.release()

    # ------------------------------------------------------------------ pass-through

    def _answers(self, req: ServedRequest, parts: list[str], path: ApiPath | None) -> bool:
        """Whether the cache answers ``req`` itself with pass-through on: its own paths and
        ``/version``, and reads of what it caches (no subresource, no upgrade)."""
        if path is None or path.resource is None:
            head = parts[:1]
            return head in OWN_PATHS or (not parts and wants_html(req.header("accept")))
        if (
            req.method not in ("GET", "HEAD")
            or path.subresource
            or tunnelled_upgrade(req.header("upgrade"), req.header("connection"))
        ):
            return False
        gv = path.group_version
        rtype = self.registry.get_gvr(gv.group, gv.version, path.resource)
        if rtype is None or rtype not in self.resources:
            return False
        # One cached because it was read is read upstream until its first sync.
        auto = self.auto_cached
        return not auto or rtype.config_name not in auto or self.resources[rtype].synced

    async def _forward(
        self,
        passthrough: PassThrough,
        req: ServedRequest,
        send: Send,
        parts: list[str],
        path: ApiPath | None,
        verb: str | None,
    ) -> None:
        """Forward ``req`` upstream as its caller (:mod:`.passthrough`)."""
        as_user = await self._impersonated(req)
        what = self._forwarded(req, parts, path, verb)
        discovery = (
            req.method == "GET"
            and parts[:1] in (["api"], ["apis"], ["openapi"])
            and (path is None or path.resource is None)
        )
        if discovery and as_user is not None and not passthrough.impersonates:
            # A caller whose identity cannot be forwarded still reads the cache: it is told
            # what the cache serves (its own discovery, as without pass-through).
            await self.routes.dispatch(Call(req, send, parts, path, verb))
            return
        if discovery:
            # The cache's own also when upstream cannot be reached, or refuses a caller that
            # sent no credentials.
            what = dataclasses.replace(
                what,
                fallback=lambda: self.routes.dispatch(Call(req, send, parts, path, verb)),
                fallback_when_refused=as_user is None and not req.header("authorization"),
            )
        await passthrough.forward(req, send, what, as_user=as_user)

    def can_forward(self, req: ServedRequest) -> bool:
        """Whether a read the cache would answer may be passed through upstream instead, as its
        caller (the read planner's choice when that is cheaper than proving the cache fresh): a
        bearer token upstream checks, or a user the daemon impersonates. Not a caller without
        credentials: upstream would see it anonymous, and refuse what the cache serves it."""
        passthrough = self.passthrough
        if passthrough is None:
            return False
        if req.header("authorization"):
            return not self.local_tokens or passthrough.impersonates
        return passthrough.impersonates and req.peer_user is not None and bool(req.peer_user[0])

    async def forward_read(
        self,
        req: ServedRequest,
        send: Send,
        parts: list[str],
        path: ApiPath,
        verb: str | None,
    ) -> None:
        """Pass a read of a cached resource through upstream, as its caller and as asked (the
        read planner chose it: :mod:`.readplan`); counted as a forwarded request, not as a read
        of something uncached."""
        assert self.passthrough is not None
        as_user = await self._impersonated(req)
        what = dataclasses.replace(self._forwarded(req, parts, path, verb), read=None)
        await self.passthrough.forward(req, send, what, as_user=as_user)

    async def _impersonated(self, req: ServedRequest) -> UserInfo | None:
        """Who a forwarded request impersonates: None to forward the caller's credentials as
        sent (a bearer token the API server checks, or none: anonymous); the verified user of
        a caller only cacheproxy can vouch for (a static token, a client certificate)."""
        if req.header("authorization") and not self.local_tokens:
            return None
        if req.header("authorization"):
            await self.admission.authenticate(req)  # 401 for a token the file does not hold
            return req.user
        if req.peer_user is not None and req.peer_user[0]:
            name, groups = req.peer_user
            return UserInfo(name, tuple(groups))
        return None

    def _forwarded(
        self, req: ServedRequest, parts: list[str], path: ApiPath | None, verb: str | None
    ) -> Forward:
        """What a forwarded request is (metrics, limits, the reads after a write)."""
        upgrading = bool(tunnelled_upgrade(req.header("upgrade"), req.header("connection")))
        if path is None or path.resource is None:
            return Forward(verb=req.method.lower(), resource="", long_running=upgrading)
        gv = path.group_version
        resource = f"{path.resource}.{gv.group}" if gv.group else path.resource
        sub = (path.subresource or "").split("/", 1)[0]
        if sub:
            resource = f"{resource}/{sub}"
        long_running = (
            verb == "watch"
            or sub in LONG_RUNNING_SUBRESOURCES
            or path.resource == "proxy"
            or upgrading
        )
        on_written = None
        if verb in WRITE_VERBS and sub in SETTLED_SUBRESOURCES:
            rtype = self.registry.get_gvr(gv.group, gv.version, path.resource)
            served = self.resources.get(rtype) if rtype is not None else None
            if served is not None:
                on_written = _written_to(served, req, path, verb)
        read = None
        if verb in READ_VERBS and not sub:
            read = UpstreamRead(gv.group, gv.version, path.resource)
        return Forward(
            verb=verb or "other",
            resource=resource,
            read=read,
            long_running=long_running,
            on_written=on_written,
        )


def _written_to(
    served: ServedResource, req: ServedRequest, path: ApiPath, verb: str
) -> Callable[[bytes], Awaitable[bool | None]]:
    """What a write to ``served`` does with its answer before it goes out: tell the consistent
    reads that follow (:meth:`.ServedResource.wrote`, :meth:`~.ServedResource.deleted`), and hold
    it until the cache holds the write (:mod:`.settling`; whether it got there, None when not
    held). What the write may change is noted now, before it is forwarded."""
    sub = (path.subresource or "").split("/", 1)[0]
    name = path.name
    settles = served.settles(path.namespace, dry_run=bool(req.param("dryRun")))
    before: Mapping[str, int] = {}
    if settles and verb == "deletecollection":
        selection = _deleted_selection(req, served, path.namespace)
        if selection is not None:
            before = served.selected_versions(selection)
    elif settles and name is not None:
        before = served.versions_of([served.key_of(path.namespace, name)])

    async def written(answer: bytes) -> bool | None:
        if verb == "deletecollection":
            # A list of what went (maybe protobuf): held until each selected entry changed.
            return await served.settle(None, before) if settles else None
        if verb == "delete" and name is not None and not sub:
            served.deleted(path.namespace, name, answer)
        else:
            served.wrote(answer)
        return await served.settle(answer, before) if settles else None

    return written


def _deleted_selection(
    req: ServedRequest, served: ServedResource, namespace: str | None
) -> Query | None:
    """What a ``deletecollection`` selects, as a list of the cache would (None when the cache
    cannot tell: selectors only upstream answers)."""
    try:
        opts = parse_list_options(
            {
                name: [value]
                for name in ("labelSelector", "fieldSelector")
                if (value := req.param(name))
            }
        )
        fields = validate_fields(served.rtype, opts.field_selector, served.index_paths)
    except ApiError:
        return None
    return Query(namespace=namespace, labels=opts.label_selector, fields=fields)


class _CodeRecording:
    """``send``, noting the status code of the response it starts (0 until then) for the
    request's measurement."""

    __slots__ = ("_send", "code")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.code = 0

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.code = message["status"]
        await self._send(message)
