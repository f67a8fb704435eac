"""The simulator: an in-memory Kubernetes API server, served as a raw ASGI application.

:class:`Simulator` holds the state (its store, faults, request counts) and its Python API for
tests, and dispatches each request: the control path ``/_sim/…`` (faults, compaction, stats;
:mod:`~cacheproxy.sim.control`), health, then — after the auth policy's authentication — version
and discovery (:mod:`cacheproxy.serving`'s, with the simulator's subresources and cacheable
aggregated documents), OpenAPI (:mod:`~cacheproxy.sim.openapidocs`), and the resource paths
(:mod:`~cacheproxy.sim.resourcerequests`; watches :mod:`~cacheproxy.sim.watchserving`). Who may do what is :mod:`~cacheproxy.sim.requestauth`'s; which verb
a request is, :mod:`~cacheproxy.sim.verbs`'s; the form an answer takes (object, metadata,
Table), :mod:`~cacheproxy.sim.render`'s; the verbs themselves,
:class:`~cacheproxy.sim.api.SimApi`'s. Every error is written as a ``metav1.Status``
(``Retry-After`` when the Status carries ``retryAfterSeconds``), as the API server's
``ErrorNegotiated`` does.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.request import parse_api_path, split_path
from cacheproxy.kube.resources import (
    BUILTIN_RESOURCES,
    GroupVersion,
    ResourceRegistry,
    ResourceType,
)
from cacheproxy.kube.versions import KubeVersion
from cacheproxy.serving import (
    Discovery,
    Receive,
    Request,
    Scope,
    Send,
    lifespan,
    send_body,
    send_error,
)
from cacheproxy.sim.api import SimApi
from cacheproxy.sim.control import control
from cacheproxy.sim.faults import Faults
from cacheproxy.sim.openapidocs import SimOpenApi
from cacheproxy.sim.render import JSON_ANSWERS
from cacheproxy.sim.requestauth import REVIEW_TYPES, SimAccess
from cacheproxy.sim.resourcerequests import RequestRecord, serve_resource
from cacheproxy.sim.simconfig import SimConfig
from cacheproxy.sim.storage import SimStore
from cacheproxy.sim.verbs import discovery_verbs, with_subresources
from cacheproxy.sim.watch import SimWatcher

__all__ = ["REVIEW_TYPES", "RequestRecord", "SimConfig", "Simulator"]

log = logging.getLogger(__name__)


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
        self.access = SimAccess(self.config.policy)
        self.review_registry = ResourceRegistry(REVIEW_TYPES)
        self.discovery = Discovery(
            group_versions=self._all_gvs,
            types_in=self._types_in,
            verbs_for=self._verbs_for,
            decorate=with_subresources,
            answers=JSON_ANSWERS,
            etag=True,
            kube=lambda: self.kube_version,
        )
        self.openapi = SimOpenApi(self.config.git_version)
        """``/openapi/v2`` and ``/openapi/v3`` (:mod:`~cacheproxy.sim.openapidocs`)."""
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.store.create(self.registry[("", "v1", "namespaces")], {"metadata": {"name": ns}})

    # ------------------------------------------------------------------ Python API

    def add_custom_resource(self, rtype: ResourceType) -> None:
        """Serve custom resource ``rtype`` from now on, as when its CRD is installed."""
        self.store.add_resource(rtype)

    def resource(self, name: str) -> ResourceType:
        found = self.registry.resolve(name)
        if found is None:
            raise KeyError(name)
        return found

    def load(
        self,
        objects: Iterable[tuple[str, dict[str, Any]]],
        *,
        as_captured: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Create ``(resource name, object)`` pairs; returns how many were created.

        ``as_captured`` keeps each object's ``creationTimestamp`` (objects captured from a real
        cluster keep their ages); otherwise, as the API server, creation time is now. An object
        that names its uid keeps it (unlike a create through the API: so that what refers to it
        — owner references, Events' ``involvedObject`` — finds it). ``progress`` is told how
        many were created so far, every 1 000."""
        n = 0
        for name, obj in objects:
            meta = obj.get("metadata") or {}
            created = meta.get("creationTimestamp") if as_captured else None
            self.store.create(self.resource(name), obj, created=created, uid=meta.get("uid"))
            n += 1
            if progress is not None and n % 1000 == 0:
                progress(n)
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
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        req = Request(scope, receive)
        try:
            await self._dispatch(req, send)
        except Exception as exc:  # a bug must still answer with a Status, never a traceback
            await send_error(req, send, exc, logger=log)

    async def _dispatch(self, req: Request, send: Send) -> None:
        parts = split_path(req.path)
        if parts[:1] == ["_sim"]:
            await self._control(req, parts[1:], send)
            return
        if parts in (["healthz"], ["livez"], ["readyz"]):
            await send_body(send, 200, b"ok", content_type=b"text/plain; charset=utf-8")
            return
        if self.faults.latency:
            await asyncio.sleep(self.faults.latency)
        user = self.access.authenticate(req)
        if not _is_resource_path(parts):
            self.access.authorize_path(user, req.path)
        if parts == ["version"]:
            await JSON_ANSWERS.send(send, req, orjson.dumps(self.version_info()))
            return
        if parts[:1] == ["openapi"]:
            await self.openapi.serve(req, send, parts, self._all_gvs())
            return
        discovery = self.discovery
        if await discovery.serve_groups(req, send, parts, server_address=self.server_address):
            return
        path = parse_api_path(parts)
        if path is None:
            raise _page_not_found()
        gv = path.group_version
        types = self.registry.in_group_version(gv) or self.review_registry.in_group_version(gv)
        if not types:
            raise _page_not_found()
        if path.resource is None:
            await discovery.send(req, send, discovery.resources(gv, types))
            return
        await serve_resource(self, req, send, path, user)

    # ------------------------------------------------------------------ discovery

    @property
    def kube_version(self) -> KubeVersion:
        """The kube-apiserver version the simulator answers as (its ``git_version``)."""
        return self.api.kube

    def version_info(self) -> dict[str, str]:
        version = self.config.git_version.lstrip("v").split(".")
        major, minor = version[0], version[1] if len(version) > 1 else "0"
        emulation: dict[str, str] = {}
        if self.kube_version.reports_emulation_version:
            previous = str(max(int(minor) - 1, 0)) if minor.isdigit() else minor
            emulation = {
                "emulationMajor": major,
                "emulationMinor": minor,
                "minCompatibilityMajor": major,
                "minCompatibilityMinor": previous,
            }
        return {
            "major": major,
            "minor": minor,
            **emulation,
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
        return gvs + [gv for gv in self.review_registry.group_versions() if gv not in gvs]

    def _types_in(self, gv: GroupVersion) -> list[ResourceType]:
        return self.registry.in_group_version(gv) + self.review_registry.in_group_version(gv)

    # ------------------------------------------------------------------ control path

    async def _control(self, req: Request, parts: list[str], send: Send) -> None:
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


def _is_resource_path(parts: list[str]) -> bool:
    """``/api/v1/<resource>…`` or ``/apis/<group>/<version>/<resource>…``."""
    return (parts[:1] == ["api"] and len(parts) > 2) or (parts[:1] == ["apis"] and len(parts) > 3)


def _page_not_found() -> ApiError:
    # 1.28 answered an unknown group with a plain-text 404; a Status is clearer (and tolerated).
    return status.resource_not_found()
