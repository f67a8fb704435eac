"""Which handler answers a request: health, monitoring, ``/version``, discovery, and the
Kubernetes API paths of the cached resources (docs/design.md §4).

A resource path is checked against what is served — its type, its scope (a namespaced path for a
cluster-scoped resource is a 404, as on the API server); writes were refused before
(:mod:`.refusals`) — and then answered by get, list (:mod:`.reads`) or watch
(:mod:`.watching`), before the first sync with a 429 and ``Retry-After``. What a read is
answered from — the cache now, an older state, or upstream — is the read planner's
(:mod:`.readplan`), carried out by :meth:`.ServedResource.decide`; the router only dispatches on
the answer. A path outside the API is a 404 naming what is served.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import orjson

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.listoptions import ListOptions, parse_list_options
from cacheproxy.kube.request import ApiPath
from cacheproxy.kube.table import WatchTables
from cacheproxy.server.admission import ServedRequest
from cacheproxy.server.consistent import ObjectKey, warning_header
from cacheproxy.server.failures import fix_for
from cacheproxy.server.homepage import HTML, wants_html
from cacheproxy.server.homepage import render as render_home
from cacheproxy.server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from cacheproxy.server.options import JSON_ANSWERS
from cacheproxy.server.ownapi import PREFIX, USER
from cacheproxy.server.query import Query
from cacheproxy.server.readplan import ForwardRead, ReadRequest, Serve
from cacheproxy.server.reads import ResponseForm, build_query, negotiate, serve_get, serve_list
from cacheproxy.server.refusals import not_cached, not_served_here
from cacheproxy.server.resource import ServedResource
from cacheproxy.server.watching import serve_watch
from cacheproxy.serving import Message, Send, send_body, with_header

if TYPE_CHECKING:
    from cacheproxy.server.app import CacheServer

__all__ = ["HEALTH_CHECKS", "OWN_PATHS", "STALENESS_HEADER", "health", "route"]

HEALTH_CHECKS = (["healthz"], ["livez"], ["readyz"])
STALENESS_HEADER = b"x-cacheproxy-staleness-seconds"
OWN_API = [PREFIX.strip("/")]
OWN_PATHS = (OWN_API, ["metrics"], ["status"], ["version"])
"""Paths (their first segment) the daemon answers itself, with pass-through on too (with
health checks and the home page)."""


async def health(server: CacheServer, send: Send, check: str, *, verbose: bool = False) -> None:
    """``/healthz``, ``/livez``, ``/readyz``; with ``?verbose`` (as the API server's) a line per
    check: ``[+]cache:pods ok``, ``[-]cache:pods not synced: list: 403: … (fix)``."""
    ok = check != "readyz" or server.ready
    body = b"ok" if ok else b"not ready"
    if verbose and check == "readyz":
        body = _readiness_report(server, ok).encode()
    await send_body(send, 200 if ok else 503, body, content_type=b"text/plain; charset=utf-8")


def _readiness_report(server: CacheServer, ok: bool) -> str:
    failures = server.metrics.failures
    lines = ["[+]ping ok"] if not server.draining else ["[-]shutting down"]
    for name, why in server.pending.items():
        lines.append(f"[-]cache:{name} not served: {why}")
    for rtype, res in server.resources.items():
        name = rtype.config_name
        failure = failures.of(name)
        if res.synced and failure is None:
            lines.append(f"[+]cache:{name} ok")
            continue
        state = "synced, but failing" if res.synced else "not synced"
        if name in server.auto_cached and not res.synced:
            state = "not synced (cached because read: not needed for readiness)"
        reason = (
            f": {failure.summary}. {fix_for(failure.code, failure.verb, name)}" if failure else ""
        )
        lines.append(f"[{'+' if res.synced else '-'}]cache:{name} {state}{reason}")
    lines.append(f"readyz check {'passed' if ok else 'failed'}")
    return "\n".join(lines) + "\n"


async def route(
    server: CacheServer,
    req: ServedRequest,
    send: Send,
    parts: list[str],
    path: ApiPath | None,
    verb: str | None,
) -> None:
    """Answer an admitted request (``parts``: its path split; ``path``: parsed as an API path)."""
    if parts[:1] == OWN_API:
        await _own_api(server, req, send)
        return
    if parts == ["metrics"]:
        body = server.metrics.exposition()
        await send_body(send, 200, body, content_type=METRICS_CONTENT_TYPE)
        return
    if parts == ["status"]:
        page = server.status_page()
        await JSON_ANSWERS.send(send, req, orjson.dumps(page))
        return
    if not parts and wants_html(req.header("accept")):
        state = server.status_page()
        html = render_home(
            state, version=server.version, api_server=server.api_server, history=server.history
        )
        await send_body(send, 200, html, content_type=HTML, headers=[(b"vary", b"Accept")])
        return
    if parts[:1] == ["openapi"] and server.openapi is not None:
        await server.openapi.serve(req, send, parts)
        return
    if parts == ["version"]:
        await JSON_ANSWERS.send(send, req, orjson.dumps(server.version))
        return
    discovery = server.discovery
    if await discovery.serve_groups(req, send, parts, server_address=server.server_address):
        return
    if path is None:
        if parts[:1] in (["api"], ["apis"]):
            raise status.resource_not_found()
        raise not_served_here(req.path)
    types = server.registry.in_group_version(path.group_version)
    if not types:
        raise _not_found(server, path)
    if path.resource is None:
        await discovery.send(req, send, discovery.resources(path.group_version, types))
        return
    res, form = _served(server, req, path, verb)
    if server.options.staleness_header:
        staleness = f"{server.staleness(res.rtype):.3f}".encode()
        send = with_header(send, STALENESS_HEADER, staleness)
    if verb == "get":
        assert path.name is not None
        given = req.param("resourceVersion")
        if given and given != "0":
            parse_list_options({"resourceVersion": [given]})  # a bad RV: the API server's 400
        get = ObjectKey(path.namespace, path.name, res.key_of(path.namespace, path.name))
        answer = await res.decide(
            ReadRequest("get", given), get=get, can_forward=server.can_forward(req)
        )
        if isinstance(answer, ForwardRead):
            await server.forward_read(req, send, parts, path, verb, most_recent=answer.most_recent)
            return
        await serve_get(
            req, _warned(send, answer), res, namespace=path.namespace, name=path.name, form=form
        )
        return
    opts = parse_list_options(
        req.query, watch=verb == "watch", name=path.name if verb == "watch" else None
    )
    query = build_query(req, res, path.namespace, opts)
    read = ReadRequest.of("watch" if verb == "watch" else "list", opts, kube=res.kube_version())
    answer = await res.decide(read, can_forward=server.can_forward(req), opts=opts)
    if isinstance(answer, ForwardRead):
        await server.forward_read(req, send, parts, path, verb, most_recent=answer.most_recent)
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
            max_page_size=server.options.max_page_size,
            at=answer.at,
        )
        return
    await _watch(server, req, send, res, query, opts, form)


def _warned(send: Send, answer: Serve) -> Send:
    """``send``, with a ``Warning`` header when a read with ``resourceVersion`` unset is served
    from the cache as it is though its freshness could not be proven."""
    if answer.warning is None:
        return send
    return with_header(send, b"warning", warning_header(answer.warning))


async def _own_api(server: CacheServer, req: ServedRequest, send: Send) -> None:
    """cacheproxy's own API (FastAPI, :mod:`.ownapi`), with the request's user."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            req.started = True
        await send(message)

    await server.api({**req.scope, USER: req.user}, req.receive, sending)


async def _watch(
    server: CacheServer,
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
    hub = server.hubs[res.rtype]
    admission = server.admission
    user = admission.admit_watch(req, len(hub.watchers))
    try:
        await serve_watch(
            req,
            send,
            res=res,
            hub=hub,
            query=query,
            opts=opts,
            tables=tables,
            options=server.options,
            refusing=lambda: server.watches_closed,
        )
    finally:
        admission.release_watch(user)


def _not_found(server: CacheServer, path: ApiPath) -> ApiError:
    """404 for a path naming a resource that is not cached: with pass-through off (where such
    reads end here), a message saying how to serve it; otherwise the API server's own."""
    if path.resource is None or server.passthrough is not None:
        return status.resource_not_found()
    cached = sorted(rtype.config_name for rtype in server.resources)
    return not_cached(path, cached, api_server=server.api_server)


def _served(
    server: CacheServer, req: ServedRequest, path: ApiPath, verb: str | None
) -> tuple[ServedResource, ResponseForm]:
    """The cached resource a read of ``path`` is answered from, and the answer's form; 404 for
    what is not served, 406 for an answer nobody accepts, 429 before the resource's first sync.
    (Writes were refused before: :mod:`.refusals`.)"""
    gv = path.group_version
    rtype = server.registry.get_gvr(gv.group, gv.version, path.resource or "")
    if rtype is None and not path.subresource:
        raise _not_found(server, path)
    if rtype is None or path.subresource:
        raise status.resource_not_found()
    if (path.namespace is not None and not rtype.namespaced) or (
        path.name is not None and rtype.namespaced and path.namespace is None
    ):
        raise status.resource_not_found()
    req.verb, req.resource = verb or "other", rtype.config_name
    res = server.resources[rtype]
    res.last_read = time.monotonic()
    form = negotiate(req, keeps_managed_fields=res.keeps_managed_fields)
    if not res.synced:
        failure = server.metrics.failures.of(rtype.config_name)
        why = f": {rtype.config_name} is not synced yet ({failure.summary})" if failure else ""
        raise status.too_many_requests(f"storage is (re)initializing{why}", retry_after=1)
    return res, form
