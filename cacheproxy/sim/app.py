"""The simulator's HTTP face: a raw ASGI application on the Kubernetes API paths.

Dispatch, authentication/authorization, fault injection and the wire format live here; which verb
a request is, :mod:`~cacheproxy.sim.routing`; the form an answer takes (object, metadata, Table),
:mod:`~cacheproxy.sim.render`; the verbs themselves, :class:`~cacheproxy.sim.api.SimApi`. Every error is written
as a ``metav1.Status`` (``Retry-After`` when the Status carries ``retryAfterSeconds``), as the
API server's ``ErrorNegotiated`` does.

The control path ``/_sim/…`` (faults, compaction, stats) is the simulator's own; see
:meth:`Simulator._control`.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import logging
import math
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import orjson

from cacheproxy.errors import ApiError
from cacheproxy.kube import discovery, status
from cacheproxy.kube.access import (
    ANONYMOUS_USER,
    NonResourceAttributes,
    ResourceAttributes,
    UserInfo,
)
from cacheproxy.kube.fields import validate_field_selector
from cacheproxy.kube.listoptions import ListOptions, parse_list_options
from cacheproxy.kube.request import (
    ApiPath,
    check_accepts_json,
    parse_api_path,
    split_path,
    wants_pretty,
)
from cacheproxy.kube.resources import (
    BUILTIN_RESOURCES,
    GroupVersion,
    ResourceRegistry,
    ResourceType,
)
from cacheproxy.kube.watchevents import event_line
from cacheproxy.serving import send_body, send_status
from cacheproxy.sim import render, statuses
from cacheproxy.sim.api import ListResult, SimApi
from cacheproxy.sim.auth import Authenticator, Authorizer
from cacheproxy.sim.config import SimConfig
from cacheproxy.sim.control import control
from cacheproxy.sim.faults import Faults, StreamFault
from cacheproxy.sim.policy import Policy
from cacheproxy.sim.reviews import (
    self_subject_access_review,
    subject_access_review,
    token_review,
)
from cacheproxy.sim.routing import discovery_verbs, resource_verb, with_subresources
from cacheproxy.sim.store import SimStore
from cacheproxy.sim.watch import SimWatcher, WatchPlan, stream_watch
from cacheproxy.sim.writes import PATCH_TYPES
from cacheproxy.tasks import cancel_and_wait

__all__ = ["RequestRecord", "SimConfig", "Simulator"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

GZIP_THRESHOLD = 128 * 1024  # the API server compresses responses above 128 KiB
JSON = b"application/json"

# The review APIs: create-only, answered from the auth policy.
REVIEW_TYPES = (
    ResourceType("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        namespaced=False,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        namespaced=False,
    ),
)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One API request as the simulator saw it."""

    verb: str
    resource: str
    namespace: str | None
    name: str | None
    params: dict[str, str]


class Simulator:
    """An in-memory Kubernetes API server. ``Simulator(...)`` is an ASGI application; serve it
    with :class:`cacheproxy.sim.server.SimServer`. ``store``, ``faults`` and the methods below
    are the Python API for tests."""

    def __init__(
        self,
        *,
        custom_resources: Iterable[ResourceType] = (),
        config: SimConfig | None = None,
    ) -> None:
        self.config = config or SimConfig()
        self.registry = ResourceRegistry([*BUILTIN_RESOURCES, *custom_resources])
        self.store = SimStore(
            self.registry,
            history_limit=self.config.history_limit,
            pod_generation=self.config.pod_generation,
        )
        self.api = SimApi(self.store, self.config)
        self.faults = Faults()
        self.requests: Counter[str] = Counter()
        """Requests served, by ``verb`` and by ``verb resource`` (the offload measure)."""
        self.request_log: deque[RequestRecord] = deque(maxlen=10_000)
        """The latest API requests, in order (tests assert the sequences clients make)."""
        self.server_address = "127.0.0.1:0"
        self.stopping = False
        """Set while the server stops: new watches are refused (503 with Retry-After)."""
        policy = self.config.policy
        self._authn = Authenticator(policy) if policy else None
        self._authz = Authorizer(policy) if policy else None
        self._review_registry = ResourceRegistry(REVIEW_TYPES)
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.store.create(self.registry[("", "v1", "namespaces")], {"metadata": {"name": ns}})

    # ------------------------------------------------------------------ Python API

    def resource(self, name: str) -> ResourceType:
        found = self.registry.resolve(name)
        if found is None:
            raise KeyError(name)
        return found

    def load(
        self, objects: Iterable[tuple[str, dict[str, Any]]], *, as_captured: bool = False
    ) -> int:
        """Create ``(resource name, object)`` pairs; returns how many were created.

        ``as_captured`` keeps each object's ``creationTimestamp`` (objects captured from a real
        cluster keep their ages); otherwise, as the API server, creation time is now."""
        n = 0
        for name, obj in objects:
            created = (obj.get("metadata") or {}).get("creationTimestamp") if as_captured else None
            self.store.create(self.resource(name), obj, created=created)
            n += 1
        return n

    def end_watches(self) -> int:
        """Close every open watch now (clients see a normal end of stream)."""
        n = 0
        for sink in self.store.watchers():
            if isinstance(sink, SimWatcher):
                sink.close("ended by fault injection")
                self.store.remove_watcher(sink)
                n += 1
        return n

    def compact(self) -> None:
        """Compact all history now: every watch or exact list at an older RV gets 410."""
        self.store.compact()

    def compact_storage(self, rv: int | None = None) -> None:
        """etcd's compaction up to ``rv`` (default: now): exact lists and continue tokens at
        older RVs get 410, as do watches of resources without a watch cache; cached watches
        still resume from their history."""
        self.store.compact_storage(rv)

    def reset_watch_caches(self) -> None:
        """The watch caches start anew, as after an API server restart: each at the current RV,
        watches from older RVs get 410 (the storage keeps its history)."""
        self.store.reset_watch_caches()

    def progress_notify(self) -> None:
        """Every watch cache learns the current RV now, as from an etcd progress notification
        (what ``progress_notify_interval`` does periodically)."""
        self.store.progress_notify()

    async def maintain(self) -> None:
        """Run the storage's periodic work until cancelled: progress notifications every
        ``progress_notify_interval`` (with ``per_resource_cache``) and compaction every
        ``compaction_interval`` up to the RV of the round before, as kube-apiserver's compactor."""
        config = self.config
        progress = config.progress_notify_interval if config.per_resource_cache else None
        compaction = config.compaction_interval
        if progress is None and compaction is None:
            return
        loop = asyncio.get_running_loop()
        next_progress = loop.time() + progress if progress else math.inf
        next_compaction = loop.time() + compaction if compaction else math.inf
        compact_to: int | None = None
        while True:
            await asyncio.sleep(max(0.0, min(next_progress, next_compaction) - loop.time()))
            now = loop.time()
            if progress and now >= next_progress:
                self.store.progress_notify()
                next_progress = now + progress
            if compaction and now >= next_compaction:
                if compact_to is not None:
                    self.store.compact_storage(compact_to)
                compact_to = self.store.rv
                next_compaction = now + compaction

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request = _Request(scope, receive)
        try:
            await self._dispatch(request, send)
        except ApiError as err:
            await send_status(send, err, started=request.headers_sent)
        except Exception:  # a bug must still answer with a Status, never a traceback
            log.exception("simulator: unexpected error on %s %s", request.method, request.path)
            await send_status(
                send, status.internal_error("unexpected server error"), started=request.headers_sent
            )

    async def _dispatch(self, req: _Request, send: Send) -> None:
        parts = split_path(req.path)
        if parts[:1] == ["_sim"]:
            await self._control(req, parts[1:], send)
            return
        if parts in (["healthz"], ["livez"], ["readyz"]):
            await send_body(send, 200, b"ok", content_type=b"text/plain; charset=utf-8")
            return
        if self.faults.latency:
            await asyncio.sleep(self.faults.latency)
        user = self._authenticate(req)
        if not _is_resource_path(parts):
            self._authorize_path(user, req.path)
        if parts == ["version"]:
            await self._send_json(req, send, 200, orjson.dumps(self.version_info()))
            return
        if parts in (["api"], ["apis"]):
            await self._discovery_root(req, send, core=parts == ["api"])
            return
        if parts[:1] == ["apis"] and len(parts) == 2:
            await self._api_group(req, send, parts[1])
            return
        path = parse_api_path(parts)
        if path is None:
            raise _page_not_found()
        gv = path.group_version
        types = self.registry.in_group_version(gv) or self._review_registry.in_group_version(gv)
        if not types:
            raise _page_not_found()
        if path.resource is None:
            body = with_subresources(discovery.api_resource_list(gv, types, self._verbs_for), types)
            await self._send_json(req, send, 200, orjson.dumps(body))
            return
        await self._resource_request(req, send, path, user)

    # ------------------------------------------------------------------ resources

    async def _resource_request(
        self, req: _Request, send: Send, path: ApiPath, user: UserInfo | None
    ) -> None:
        gv = path.group_version
        namespace, name, sub = path.namespace, path.name, path.subresource
        rtype = self.registry.get_gvr(gv.group, gv.version, path.resource or "")
        if rtype is None:
            review = self._review_registry.get_gvr(gv.group, gv.version, path.resource or "")
            if review is not None and req.method == "POST" and name is None and sub is None:
                await self._review(req, send, review, user)
                return
            raise status.resource_not_found()
        if namespace is not None and not rtype.namespaced:
            raise status.resource_not_found()
        if name is not None and rtype.namespaced and namespace is None:
            raise status.resource_not_found()
        query = req.query
        verb = resource_verb(req.method, path, query, rtype)
        self._authorize(user, verb, rtype, namespace or "", name or "", sub or "")
        self.requests[verb] += 1
        self.requests[f"{verb} {rtype.qualified}"] += 1
        self.request_log.append(
            RequestRecord(
                verb=verb,
                resource=rtype.qualified,
                namespace=namespace,
                name=name,
                params={k: v[0] for k, v in query.items() if v},
            )
        )
        failure = self.faults.take_failure(
            verb if verb in ("watch", "list", "get", "create") else "any"  # type: ignore[arg-type]
        )
        if failure is not None and not (verb == "watch" and failure.code == 410):
            raise failure

        if verb == "watch":
            opts = self._options(rtype, query, watch=True, name=name)
            await self._watch(req, send, rtype, namespace, opts, forced_error=failure)
        elif verb == "list":
            opts = self._options(rtype, query, watch=False)
            result = await self.api.list(rtype, namespace, opts)
            await self._send_list(req, send, result)
        elif verb == "get":
            assert name is not None
            rv = (query.get("resourceVersion") or [""])[0]
            body = await self.api.get(rtype, namespace, name, rv)
            await self._send_object(req, send, rtype, body)
        elif verb == "create" and sub == "binding":
            assert name is not None
            answer = self.api.bind(rtype, namespace, name, await req.json())
            await self._send_json(req, send, 201, orjson.dumps(answer))
        elif verb == "create":
            obj = self.api.create(rtype, namespace, await req.json())
            await self._send_json(req, send, 201, orjson.dumps(obj))
        elif verb == "update":
            assert name is not None
            obj = self.api.update(rtype, namespace, name, await req.json(), subresource=sub)
            await self._send_json(req, send, 200, orjson.dumps(obj))
        elif verb == "patch":
            assert name is not None
            ctype = req.header("content-type").split(";")[0].strip()
            if ctype not in PATCH_TYPES:
                raise statuses.unsupported_media_type()
            body = await req.json()
            obj = self.api.patch(rtype, namespace, name, ctype, body, subresource=sub)
            await self._send_json(req, send, 200, orjson.dumps(obj))
        elif verb == "delete":
            assert name is not None
            obj = self.api.delete(rtype, namespace, name)
            await self._send_json(req, send, 200, orjson.dumps(obj))
        else:  # deletecollection
            opts = self._options(rtype, query, watch=False)
            await self._send_json(
                req, send, 200, self.api.delete_collection(rtype, namespace, opts)
            )

    def _options(
        self,
        rtype: ResourceType,
        query: dict[str, list[str]],
        *,
        watch: bool,
        name: str | None = None,
    ) -> ListOptions:
        try:
            opts = parse_list_options(query, watch=watch, name=name)
        except ApiError as err:
            if err.code == 422 and watch and not self.config.watch_list:
                raise _without_watch_list(err) from None
            raise
        if opts.watch and opts.send_initial_events is not None and not self.config.watch_list:
            raise _without_watch_list(None)
        validate_field_selector(rtype, opts.field_selector)
        return opts

    async def _watch(
        self,
        req: _Request,
        send: Send,
        rtype: ResourceType,
        namespace: str | None,
        opts: ListOptions,
        *,
        forced_error: ApiError | None,
    ) -> None:
        send = render.watch_send(
            send, rtype, render.negotiate(req.header("accept"), req.query, verb="watch")
        )
        opts = self.api.watch_options(rtype, opts)
        if forced_error is None:
            await self.api.wait_for_watch(rtype, opts)
        if self.stopping:
            # The server is going away: a watch opened now would outlive it.
            raise status.service_unavailable("the server is shutting down", retry_after=1)
        stream_fault = self.faults.take_stream_fault()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", JSON), (b"cache-control", b"no-cache, private")],
            }
        )
        req.headers_sent = True
        if forced_error is not None:
            await _send_error_event(send, forced_error)
            return
        try:
            watcher, plan = self.api.open_watch(rtype, namespace, opts)
        except ApiError as err:
            # A 410 after the response started is one ERROR event, then the end (cacher.go).
            await _send_error_event(send, err)
            return
        disconnect = asyncio.create_task(req.wait_disconnect(), name="sim-watch-disconnect")
        disconnect.add_done_callback(lambda _: watcher.close("client disconnected"))
        try:
            await self._stream(send, watcher, plan, stream_fault, lambda: self.api.cache_rv(rtype))
        finally:
            self.store.remove_watcher(watcher)
            watcher.close()
            await cancel_and_wait(disconnect)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _stream(
        self,
        send: Send,
        watcher: SimWatcher,
        plan: WatchPlan,
        fault: StreamFault | None,
        cache_rv: Callable[[], int],
    ) -> None:
        if fault == "silent":
            # Neither events nor bookmarks until the deadline: a stalled watch.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + plan.timeout
            while not watcher.closed and loop.time() < deadline:
                await watcher.wait(deadline - loop.time())
                watcher.drain()
            return
        first = True
        async for chunk in stream_watch(watcher, plan, current_rv=cache_rv):
            if fault == "garbage" and first:
                chunk = b"{this is not json\n" + chunk
            elif fault == "truncate":
                await send(
                    {
                        "type": "http.response.body",
                        "body": chunk[: max(1, len(chunk) // 2)],
                        "more_body": True,
                    }
                )
                return
            first = False
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

    # ------------------------------------------------------------------ auth

    def _authenticate(self, req: _Request) -> UserInfo | None:
        if self._authn is None:
            return None
        peer = req.scope.get("extensions", {}).get("tls", {}).get("peer_user")
        return self._authn.authenticate(req.header("authorization") or None, peer)

    def _authorize_path(self, user: UserInfo | None, path: str) -> None:
        """Discovery and ``/version`` are non-resource URLs, authorized by path (RBAC's
        ``nonResourceURLs``; the bootstrap roles open them to authenticated users)."""
        if self._authz is None or user is None:
            return
        self._authz.check(user, NonResourceAttributes(verb="get", path=path))

    def _authorize(
        self,
        user: UserInfo | None,
        verb: str,
        rtype: ResourceType,
        namespace: str,
        name: str,
        subresource: str = "",
    ) -> None:
        if self._authz is None or user is None:
            return
        if (rtype.group, rtype.resource) == ("", "namespaces") and name:
            # RequestInfo: /api/v1/namespaces/{name} is in the namespace {name}, so a binding in
            # a namespace may let its subjects read that namespace object.
            namespace = name
        attrs = ResourceAttributes(
            verb=verb,
            group=rtype.group,
            resource=rtype.resource,
            namespace=namespace,
            name=name,
            subresource=subresource,
        )
        self._authz.check(user, attrs)

    async def _review(
        self, req: _Request, send: Send, rtype: ResourceType, user: UserInfo | None
    ) -> None:
        body = await req.json()
        if not isinstance(body, dict):
            raise status.bad_request("the request body must be a JSON object")
        policy = self.config.policy or Policy.from_mapping({})
        authn = self._authn or Authenticator(policy)
        authz = self._authz or Authorizer(policy)
        failure = self.faults.take_failure("create")
        if failure is not None:
            raise failure
        if rtype.resource == "tokenreviews":
            self._authorize(user, "create", rtype, "", "")
            answer = token_review(authn, body)
        elif rtype.resource == "subjectaccessreviews":
            self._authorize(user, "create", rtype, "", "")
            answer = subject_access_review(authz, body)
        else:
            # The field manager defaults to the User-Agent up to its first "/" (as the API server).
            manager = req.header("user-agent").split("/", 1)[0] or None
            answer = self_subject_access_review(
                authz, user or ANONYMOUS_USER, body, manager=manager
            )
        await self._send_json(req, send, 201, orjson.dumps(answer))

    # ------------------------------------------------------------------ discovery

    def version_info(self) -> dict[str, str]:
        version = self.config.git_version.lstrip("v").split(".")
        return {
            "major": version[0],
            "minor": version[1] if len(version) > 1 else "0",
            "gitVersion": self.config.git_version,
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }

    def _verbs_for(self, rtype: ResourceType) -> list[str]:
        if rtype in REVIEW_TYPES:
            return ["create"]
        return discovery_verbs(rtype)

    def _all_gvs(self) -> list[GroupVersion]:
        gvs = self.registry.group_versions()
        return gvs + [gv for gv in self._review_registry.group_versions() if gv not in gvs]

    def _types_in(self, gv: GroupVersion) -> list[ResourceType]:
        return self.registry.in_group_version(gv) + self._review_registry.in_group_version(gv)

    async def _discovery_root(self, req: _Request, send: Send, *, core: bool) -> None:
        gvs = [gv for gv in self._all_gvs() if (gv.group == "") == core]
        version = discovery.negotiate_aggregated(req.header("accept"))
        if version is not None:
            doc = discovery.aggregated_discovery(
                gvs, self._types_in, self._verbs_for, version=version
            )
            doc = with_subresources(doc, [t for gv in gvs for t in self._types_in(gv)])
            ctype = discovery.aggregated_content_type(version).encode()
            body = orjson.dumps(doc)
            # Aggregated discovery is cacheable: public, with a strong ETag (the upper-case hex
            # SHA-512 of the document, as apiserver's aggregated/etag.go) and 304 on a match.
            etag = b'"%s"' % hashlib.sha512(body).hexdigest().upper().encode()
            if req.header("if-none-match") == etag.decode():
                headers = [(b"etag", etag), (b"cache-control", b"public"), (b"vary", b"Accept")]
                await send({"type": "http.response.start", "status": 304, "headers": headers})
                req.headers_sent = True
                await send({"type": "http.response.body", "body": b""})
                return
            await self._send_json(
                req, send, 200, body, content_type=ctype, vary=b"Accept", etag=etag
            )
            return
        _negotiate(req)
        doc = discovery.api_versions(self.server_address) if core else discovery.api_group_list(gvs)
        await self._send_json(req, send, 200, orjson.dumps(doc))

    async def _api_group(self, req: _Request, send: Send, group: str) -> None:
        versions = [gv.version for gv in self._all_gvs() if gv.group == group]
        if not versions:
            raise _page_not_found()
        doc = {"kind": "APIGroup", "apiVersion": "v1", **discovery.api_group(group, versions)}
        await self._send_json(req, send, 200, orjson.dumps(doc))

    # ------------------------------------------------------------------ control path

    async def _control(self, req: _Request, parts: list[str], send: Send) -> None:
        """``/_sim/…``: the simulator's own control path (:mod:`cacheproxy.sim.control`)."""
        body: dict[str, Any] = {}
        if req.method == "POST":
            raw = await req.body()
            loaded = orjson.loads(raw) if raw.strip() else {}
            if not isinstance(loaded, dict):
                raise status.bad_request("the control body must be a JSON object")
            body = loaded
        result = control(self, req.method, "/".join(parts), body)
        await send_body(send, 200, orjson.dumps(result))

    on_restart: Callable[[], None] | None = None
    """Set by the server: drop every connection and restart listening (state kept)."""

    # ------------------------------------------------------------------ responses

    async def _send_list(self, req: _Request, send: Send, result: ListResult) -> None:
        form = render.negotiate(req.header("accept"), req.query, verb="list")
        await self._send_json(req, send, 200, render.list_body(result, form))

    async def _send_object(
        self, req: _Request, send: Send, rtype: ResourceType, full: bytes
    ) -> None:
        form = render.negotiate(req.header("accept"), req.query, verb="get")
        await self._send_json(req, send, 200, render.object_body(rtype, full, form))

    async def _send_json(
        self,
        req: _Request,
        send: Send,
        code: int,
        body: bytes,
        *,
        content_type: bytes = JSON,
        vary: bytes | None = None,
        etag: bytes | None = None,
    ) -> None:
        if content_type == JSON:
            _negotiate(req)
        if req.wants_pretty():
            body = orjson.dumps(orjson.loads(body), option=orjson.OPT_INDENT_2)
        cache_control = b"public" if etag else b"no-cache, private"
        headers = [(b"content-type", content_type), (b"cache-control", cache_control)]
        if etag:
            headers.append((b"etag", etag))
        if vary:
            headers.append((b"vary", vary))
        if len(body) > GZIP_THRESHOLD and "gzip" in req.header("accept-encoding"):
            body = gzip.compress(body, compresslevel=1)
            headers += [(b"content-encoding", b"gzip"), (b"vary", b"Accept-Encoding")]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": code, "headers": headers})
        req.headers_sent = True
        await send({"type": "http.response.body", "body": body})


class _Request:
    def __init__(self, scope: Scope, receive: Receive) -> None:
        self.scope = scope
        self._receive = receive
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.query: dict[str, list[str]] = parse_qs(
            scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True
        )
        self._headers: dict[str, str] = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
        }
        self.headers_sent = False
        self._disconnected = False

    def header(self, name: str) -> str:
        return self._headers.get(name, "")

    def wants_pretty(self) -> bool:
        return wants_pretty(self.query, self.header("user-agent"))

    async def body(self) -> bytes:
        chunks = []
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._disconnected = True
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        return b"".join(chunks)

    async def json(self) -> Any:
        raw = await self.body()
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise status.bad_request(f"the request body is not valid JSON: {exc}") from None

    async def wait_disconnect(self) -> None:
        if self._disconnected:
            return
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                return


def _is_resource_path(parts: list[str]) -> bool:
    """``/api/v1/<resource>…`` or ``/apis/<group>/<version>/<resource>…``."""
    return (parts[:1] == ["api"] and len(parts) > 2) or (parts[:1] == ["apis"] and len(parts) > 3)


def _negotiate(req: _Request) -> None:
    """406 unless the client accepts JSON (Table and protobuf askers fall back to JSON)."""
    check_accepts_json(req.header("accept"), statuses.REPRESENTATIONS)


def _without_watch_list(invalid: ApiError | None) -> ApiError:
    """The 422 of a watch-list when the ``WatchList`` feature gate is off: the options' other
    violations, then this one (apimachinery's ``ValidateListOptions``)."""
    causes = list((invalid.status.get("details") or {}).get("causes") or []) if invalid else []
    causes.append(
        status.forbidden_cause(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        )
    )
    return status.invalid_list_options(causes)


def _page_not_found() -> ApiError:
    # 1.28 answered an unknown group with a plain-text 404; a Status is clearer (and tolerated).
    return status.resource_not_found()


async def _send_error_event(send: Send, err: ApiError) -> None:
    line = event_line("ERROR", orjson.dumps(err.status))
    await send({"type": "http.response.body", "body": line, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
