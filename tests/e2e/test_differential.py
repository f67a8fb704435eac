"""The simulator against a real kube-apiserver: the same requests to both, every difference either
listed in :data:`KNOWN` (with its reason) or a failure.

The simulator runs as kube-apiserver 1.28 does (:meth:`SimConfig.kube_1_28`) and holds the demo
cluster the real one was seeded with (``demo()``). Each probe sends the same requests to both and
reduces each answer to an *observation*: named aspects (status code, Content-Type, Status bodies,
item names in order, list metadata, watch events, resourceVersion relations) with what legitimately
differs normalised away:

- uids, timestamps, managedFields and resourceVersion *numbers* are never compared; RVs are
  compared by their relations instead (a list's RV covers its items, a continue token is bound to
  its list's RV, a watch from N sends only events after N, a bookmark is not older than what came
  before it);
- objects the API server makes for itself (its own ConfigMaps, the ``kubernetes`` Service, the
  ``team-a`` namespace of the test users …) are left out of the real server's lists: only objects
  the simulator holds too are compared;
- the initial events of a watch are compared as a set (the watch cache of 1.28 sends them in the
  order of a hash map).

An aspect that differs is a failure unless :data:`KNOWN` lists it for that probe; a listed
difference that no longer shows is a failure too (the list stays true). Probes that write use the
namespace ``differential`` on both servers and delete what they made.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fnmatch
import json
import re
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from cacheproxy.envtest import Cluster, User
from cacheproxy.kube.resources import BUILTIN_RESOURCES
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.sim.simulator import REVIEW_TYPES
from tests.e2e.support import demo

# On 1.32 too, where it answers unlike both 1.28 and 1.36: only a first page's continue key
# rooted, the list blueprint on a watch-list's end bookmark, its Table columns.
ON_1_32 = (
    "*[[]kube1.32-pages/*",
    "*[[]kube1.32-compaction/*",
    "*[[]kube1.32-table/*",
    "*watch_list*",
)
pytestmark = [pytest.mark.every_server, pytest.mark.also_on("1.32", only=ON_1_32)]

Json = dict[str, Any]
Observation = dict[str, Any]

NS = "differential"
"""Where probes that write make their objects (on both servers)."""
MERGE = {"Content-Type": "application/merge-patch+json"}
TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
METADATA_ACCEPT = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
DISCOVERY_V2BETA1 = (
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
DISCOVERY_V2 = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)


# ---------------------------------------------------------------------------- the two servers


@dataclass
class Server:
    """One side of the comparison: its HTTP client and the few things done to it out of band."""

    name: str
    http: httpx.AsyncClient
    compact: Callable[[int], Awaitable[None]]
    """Compact storage up to an RV (etcd's compaction; the simulator's)."""
    restart: Callable[[], Awaitable[None]]
    """Restart the API server (objects and storage kept; connections and watch caches lost)."""
    known: frozenset[tuple[str, str]]
    """(collection path, namespace/name) of every object the simulator holds: what is compared."""
    verify: ssl.SSLContext | bool = True
    users: dict[str, dict[str, str]] = field(default_factory=dict)
    """Request headers of the test users (the same bearer tokens on both servers)."""

    def keep(self, path: str, item: Json) -> bool:
        if self.name == "sim":
            return True
        meta = item.get("metadata", {})
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        return (_collection_of(path), key) in self.known or meta.get("namespace") == NS


def _collection_of(path: str) -> str:
    """``pods`` for every pods path (cluster-wide, in a namespace, one object)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
        group = ""
    else:
        rest = parts[3:]
        group = parts[1] if len(parts) > 1 else ""
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        rest = rest[2:]
    resource = rest[0] if rest else ""
    return f"{group}/{resource}" if group else resource


def _known_keys(sim: Simulator) -> frozenset[tuple[str, str]]:
    keys = set()
    for rtype in sim.registry.values():
        collection = f"{rtype.group}/{rtype.resource}" if rtype.group else rtype.resource
        for namespace, name in sim.store.names(rtype):
            keys.add((collection, f"{namespace}/{name}"))
    return frozenset(keys)


# ---------------------------------------------------------------------------- observations


def _decode_token(token: str) -> Json:
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    decoded: Json = json.loads(raw)
    return decoded


def _status(body: Json) -> Observation:
    meta = dict(body.get("metadata") or {})
    if "continue" in meta:
        token = _decode_token(meta["continue"])
        meta["continue"] = {"rv": token["rv"], "start": token["start"]}
    message = body.get("message")
    return {
        "status": {k: body.get(k) for k in ("kind", "apiVersion", "status", "reason", "code")},
        "status.message": re.sub(r"\b\d+\b", "N", message) if isinstance(message, str) else message,
        "status.details": body.get("details"),
        "status.metadata": meta,
    }


def _rv(obj: Json) -> int:
    return int(obj["metadata"]["resourceVersion"])


def _list(server: Server, path: str, body: Json) -> Observation:
    items = [i for i in body.get("items", []) if server.keep(path, i)]
    meta = body.get("metadata", {})
    obs: Observation = {
        "kind": (body.get("kind"), body.get("apiVersion")),
        "items": [_name(i) for i in items],
        "list.metadata": sorted(meta),
        "list.remainingItemCount": meta.get("remainingItemCount"),
        "items.typed": sorted({("kind" in i, "apiVersion" in i) for i in items}),
        "items.shape": sorted({_shape(i) for i in items}),
        "items.managedFields": sorted({"managedFields" in i.get("metadata", {}) for i in items}),
        "rv: list covers its items": all(_rv(i) <= int(meta["resourceVersion"]) for i in items),
    }
    if meta.get("continue"):
        token = _decode_token(meta["continue"])
        obs["continue.start"] = token["start"]
        obs["rv: continue token at the list's rv"] = str(token["rv"]) == meta["resourceVersion"]
    return obs


def _name(obj: Json) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


_AGO = re.compile(r"\((\d+[smhdy])+ ago\)")


def _timeless(cell: Any) -> Any:
    """A cell with the age of a moment in it (the pods' Restarts: ``1 (40s ago)``) made
    comparable: each server loaded the demo at its own moment."""
    return _AGO.sub("(N ago)", cell) if isinstance(cell, str) else cell


def _table(server: Server, path: str, body: Json) -> Observation:
    rows = [r for r in body.get("rows", []) if server.keep(path, r.get("object", {}))]
    columns = [c["name"] for c in body.get("columnDefinitions", [])]
    age = columns.index("Age") if "Age" in columns else None
    return {
        "kind": (body.get("kind"), body.get("apiVersion")),
        "table.columns": body.get("columnDefinitions"),
        "table.rows": [_name(r.get("object", {})) for r in rows],
        "table.cells": [[_timeless(c) for i, c in enumerate(r["cells"]) if i != age] for r in rows],
        "table.row.object": sorted({(r.get("object") or {}).get("kind", "") for r in rows}),
        "list.metadata": sorted(body.get("metadata", {})),
    }


def observe(server: Server, path: str, response: httpx.Response) -> Observation:
    """What one answer says, with what differs legitimately left out."""
    obs: Observation = {
        "code": response.status_code,
        "content-type": response.headers.get("content-type"),
        "retry-after": response.headers.get("retry-after"),
    }
    try:
        body = response.json()
    except ValueError:
        obs["text"] = response.text
        return obs
    if not isinstance(body, dict):
        obs["body"] = body
        return obs
    kind = body.get("kind", "")
    if kind == "Status":
        obs.update(_status(body))
    elif kind == "Table":
        obs.update(_table(server, path, body))
    elif "items" in body and kind.endswith("List"):
        obs.update(_list(server, path, body))
    else:
        obs["kind"] = (kind, body.get("apiVersion"))
        if "metadata" in body:
            obs["object"] = _name(body)
            obs["object.shape"] = _shape(body)
            obs["object.managedFields"] = "managedFields" in body["metadata"]
    return obs


def prefixed(prefix: str, observation: Observation) -> Observation:
    """``observation``'s aspects under ``prefix.`` (several answers in one probe)."""
    return {f"{prefix}.{k}": v for k, v in observation.items()}


def _shape(obj: Json) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An object's top-level keys and metadata keys, in order (what a server sets, where), but
    ``managedFields`` (an aspect of its own)."""
    meta = obj.get("metadata") or {}
    return tuple(obj), tuple(k for k in meta if k != "managedFields")


# ---------------------------------------------------------------------------- watches


@dataclass
class WatchResult:
    code: int
    content_type: str | None
    events: list[Json]


async def read_watch(
    server: Server,
    path: str,
    params: dict[str, str],
    *,
    until: Callable[[list[Json]], bool] = lambda _: False,
    seconds: float = 2.0,
    during: Callable[[], Awaitable[None]] | None = None,
) -> WatchResult:
    """Events of a watch until ``until(events)``, the stream's end or ``seconds``; ``during`` is
    run once the response started (a write the watch should see)."""
    events: list[Json] = []
    async with server.http.stream("GET", path, params=params) as response:
        if response.status_code != 200:
            await response.aread()
            return WatchResult(response.status_code, response.headers.get("content-type"), [])
        if during is not None:
            await during()
        with contextlib.suppress(TimeoutError, StopAsyncIteration, httpx.ReadTimeout):
            async with (
                asyncio.timeout(seconds),
                contextlib.aclosing(response.aiter_lines()) as lines,
            ):
                while not until(events):
                    line = await anext(lines)
                    if line.strip():
                        event = json.loads(line)
                        obj = event.get("object", {})
                        if (
                            server.keep(path, obj)
                            or event["type"] in ("BOOKMARK", "ERROR")
                            or obj.get("kind") == "Table"
                        ):
                            events.append(event)
        return WatchResult(200, response.headers.get("content-type"), events)


def observe_watch(result: WatchResult, *, since: int | None = None, initial: bool) -> Observation:
    """A watch's observation. ``initial``: its leading ADDED events are the initial state (a
    set); ``since``: the RV it started from (every event must be newer)."""
    obs: Observation = {"code": result.code, "content-type": result.content_type}
    events = result.events
    lead = 0
    if initial:
        while lead < len(events) and events[lead]["type"] == "ADDED":
            lead += 1
        obs["watch.initial"] = sorted(_name(e["object"]) for e in events[:lead])
    rest: list[Any] = []
    for event in events[lead:]:
        obj = event["object"]
        if event["type"] == "ERROR":
            rest.append(("ERROR", _status(obj)))
        elif event["type"] == "BOOKMARK":
            rest.append(("BOOKMARK", obj["metadata"].get("annotations"), obj.get("kind")))
        else:
            rest.append((event["type"], _name(obj)))
    obs["watch.events"] = rest
    seen = 0
    ordered = True
    for event in events:
        if event["type"] == "ERROR":
            continue
        rv = _rv(event["object"])
        if event["type"] == "BOOKMARK":
            ordered = ordered and rv >= seen
        seen = max(seen, rv)
    obs["rv: bookmarks not older than the events before them"] = ordered
    if since is not None:
        obs["rv: events newer than the watch's rv"] = all(
            _rv(e["object"]) > since
            for e in events
            if e["type"] in ("ADDED", "MODIFIED", "DELETED")
        )
    return obs


# ---------------------------------------------------------------------------- probes

Probe = Callable[[Server], Awaitable[Observation]]
PROBES: dict[str, Probe] = {}
"""Every probe by id; the ids are what :data:`KNOWN` names."""
WATCHLIST_PROBES: dict[str, Probe] = {}
"""Probes against the servers with the WatchList feature gate on."""


def probe(name: str, *, table: dict[str, Probe] = PROBES) -> Callable[[Probe], Probe]:
    def register(fn: Probe) -> Probe:
        assert name not in table, name
        table[name] = fn
        return fn

    return register


def request(
    name: str,
    path: str,
    params: dict[str, str] | None = None,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    table: dict[str, Probe] = PROBES,
) -> None:
    """A probe of one request."""

    async def run(server: Server) -> Observation:
        response = await server.http.request(method, path, params=params, headers=headers)
        return observe(server, path, response)

    probe(name, table=table)(run)


PODS = "/api/v1/pods"
NS1_PODS = "/api/v1/namespaces/ns-1/pods"

# Lists and selectors.
request("list/pods", PODS)
request("list/pods-ns1", NS1_PODS)
request("list/pods-missing-namespace", "/api/v1/namespaces/no-such-namespace/pods")
for _path in (
    "/api/v1/nodes",
    "/api/v1/namespaces",
    "/api/v1/namespaces/ns-2/configmaps",
    "/api/v1/namespaces/ns-0/services",
    "/api/v1/namespaces/ns-0/events",
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/namespaces/ns-2/replicasets",
):
    request(f"list{_path.removeprefix('/api/v1').removeprefix('/apis')}", _path)
for _i, _selector in enumerate(
    ["app=app-1", "app!=app-1", "app in (app-0,app-2)", "tier notin (cache),app", "!team"]
):
    request(f"list/label-selector-{_i}", PODS, {"labelSelector": _selector})
for _i, _selector in enumerate(
    [
        "spec.nodeName=node-2",
        "status.phase!=Running",
        "metadata.namespace=ns-1,metadata.name!=x",
        "spec.restartPolicy=Always,spec.schedulerName=default-scheduler",
    ]
):
    request(f"list/field-selector-{_i}", PODS, {"fieldSelector": _selector})
request("list/field-selector-nodes", "/api/v1/nodes", {"fieldSelector": "spec.unschedulable=false"})

# Refused lists.
request("error/label-selector-open-set", PODS, {"labelSelector": "app in (a"})
request("error/label-selector-empty-value", PODS, {"labelSelector": "app=="})
request("error/field-selector-unsupported", PODS, {"fieldSelector": "spec.noSuchField=x"})
request("error/field-selector-no-operator", PODS, {"fieldSelector": "spec.nodeName"})
request("error/rvm-without-rv", PODS, {"resourceVersionMatch": "Exact"})
request("error/rvm-unknown", PODS, {"resourceVersionMatch": "Sometimes", "resourceVersion": "1"})
request("error/rvm-exact-rv0", PODS, {"resourceVersionMatch": "Exact", "resourceVersion": "0"})
request("error/rv-not-a-number", PODS, {"resourceVersion": "abc"})
request("error/continue-not-a-token", PODS, {"continue": "not-a-token"})
request("error/continue-with-rv", PODS, {"continue": "x", "resourceVersion": "5"})
request("error/limit-not-a-number", PODS, {"limit": "ten"})
request("error/list-send-initial-events", PODS, {"sendInitialEvents": "true"})


def refused_or_watched(name: str, path: str, params: dict[str, str]) -> None:
    """A probe of a watch one server version refuses and another serves (``WatchList`` off
    in 1.28, on in 1.32): its Status when refused, else the watch for a second."""

    async def run(server: Server) -> Observation:
        query = {**params, "timeoutSeconds": "1"}
        watch = await read_watch(server, path, query, seconds=4)
        if watch.code == 200:
            return observe_watch(watch, initial=True)
        return observe(server, path, await server.http.get(path, params=query))

    probe(name)(run)


refused_or_watched(
    "error/watch-list-without-gate", PODS, {"watch": "1", "sendInitialEvents": "true"}
)
refused_or_watched(
    "error/watch-list-gate-off",
    PODS,
    {"watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"},
)
request("error/unknown-resource", "/api/v1/nosuchthings")
request("error/unknown-group", "/apis/no.such.group/v1/things")
request("error/cluster-resource-in-namespace", "/api/v1/namespaces/ns-0/nodes")
request("error/create-on-object-path", "/api/v1/namespaces/ns-0/pods/x", method="POST")
request("error/not-acceptable", PODS, headers={"Accept": "text/html"})

# Gets.
request("get/node", "/api/v1/nodes/node-1")
request("get/namespace", "/api/v1/namespaces/ns-1")
request("get/deployment", "/apis/apps/v1/namespaces/ns-0/deployments/app-0")
request("get/not-found", "/api/v1/namespaces/ns-0/pods/no-such-pod")
request("get/not-found-group", "/apis/apps/v1/namespaces/ns-0/deployments/no-such")
request("get/missing-namespace", "/api/v1/namespaces/no-such-namespace/pods/x")
request("get/node-rv0", "/api/v1/nodes/node-1", {"resourceVersion": "0"})

# Pages.


def walk(path: str, params: dict[str, str]) -> Probe:
    """A paged list followed to its end (each page an observation of its own)."""

    async def run(server: Server) -> Observation:
        obs: Observation = {}
        query = dict(params)
        for page in range(30):
            response = await server.http.get(path, params=query)
            for key, value in observe(server, path, response).items():
                obs[f"page{page}.{key}"] = value
            token = response.json().get("metadata", {}).get("continue")
            if response.status_code != 200 or not token:
                break
            query = {k: v for k, v in params.items() if k != "resourceVersion"}
            query["continue"] = token
        return obs

    return run


for _name_, _path, _params in [
    ("pages/pods-ns1", NS1_PODS, {"limit": "7"}),
    ("pages/pods-ns1-label-selector", NS1_PODS, {"limit": "4", "labelSelector": "tier!=cache"}),
    (
        "pages/pods-ns1-field-selector",
        NS1_PODS,
        {"limit": "3", "fieldSelector": "spec.nodeName=node-1"},
    ),
    ("pages/pods-ns1-rv0", NS1_PODS, {"limit": "5", "resourceVersion": "0"}),
    (
        "pages/events-ns0-rv0",
        "/api/v1/namespaces/ns-0/events",
        {"limit": "4", "resourceVersion": "0"},
    ),
    ("pages/nodes", "/api/v1/nodes", {"limit": "2"}),
]:
    probe(_name_)(walk(_path, _params))

# Tables and metadata-only lists.
request("table/pods-ns1", NS1_PODS, headers={"Accept": TABLE_ACCEPT})
request("table/pods-ns1-limit", NS1_PODS, {"limit": "3"}, headers={"Accept": TABLE_ACCEPT})
request("table/nodes", "/api/v1/nodes", headers={"Accept": TABLE_ACCEPT})
request(
    "table/deployments",
    "/apis/apps/v1/namespaces/ns-0/deployments",
    headers={"Accept": TABLE_ACCEPT},
)
request("table/configmaps", "/api/v1/namespaces/ns-0/configmaps", headers={"Accept": TABLE_ACCEPT})
request("table/node", "/api/v1/nodes/node-2", headers={"Accept": TABLE_ACCEPT})
request(
    "table/include-object",
    "/api/v1/namespaces/ns-0/services",
    {"includeObject": "Object"},
    headers={"Accept": TABLE_ACCEPT},
)
request(
    "table/include-object-bad", NS1_PODS, {"includeObject": "All"}, headers={"Accept": TABLE_ACCEPT}
)
request("metadata/pods-ns1", NS1_PODS, headers={"Accept": METADATA_ACCEPT})


# Discovery.


def discovery(name: str, path: str, accept: str | None = None) -> None:
    async def run(server: Server) -> Observation:
        headers = {"Accept": accept} if accept else {}
        response = await server.http.get(path, headers=headers)
        obs: Observation = {
            "code": response.status_code,
            "content-type": response.headers.get("content-type"),
        }
        body = response.json()
        obs["kind"] = (body.get("kind"), body.get("apiVersion"))
        obs.update(_discovery(body))
        return obs

    probe(name)(run)


SERVED = frozenset((r.group, r.resource) for r in (*BUILTIN_RESOURCES, *REVIEW_TYPES))
"""(group, resource) of everything the simulator serves: discovery is compared for these."""
GROUPS = frozenset(group for group, _ in SERVED)


def _discovery(body: Json) -> Observation:
    kind = body.get("kind")
    if kind == "APIVersions":
        return {"versions": body.get("versions"), "keys": sorted(body)}
    if kind == "APIGroupList":
        groups = {g["name"]: g for g in body["groups"]}
        return {f"group {g}": groups.get(g) for g in sorted(GROUPS - {""})}
    if kind == "APIGroup":
        return {"group": body}
    if kind == "APIResourceList":
        group = body["groupVersion"].rpartition("/")[0]
        return {
            f"resource {r['name']}": {k: v for k, v in r.items() if k != "storageVersionHash"}
            for r in body["resources"]
            if (group, r["name"].split("/")[0]) in SERVED
        }
    if kind == "APIGroupDiscoveryList":
        out: Observation = {}
        for item in body["items"]:
            group = item["metadata"].get("name", "")
            for version in item["versions"]:
                for resource in version["resources"]:
                    if (group, resource["resource"]) in SERVED:
                        name = f"{group}/{version['version']}/{resource['resource']}"
                        subresources = resource.pop("subresources", [])
                        out[name] = resource
                        for sub in subresources:
                            out[f"{name}/{sub['subresource']}"] = sub
        return out
    return {"keys": sorted(body)}


discovery("discovery/api", "/api")
discovery("discovery/apis", "/apis")
discovery("discovery/api-v1", "/api/v1")
discovery("discovery/apps", "/apis/apps")
discovery("discovery/apps-v1", "/apis/apps/v1")
# v2beta1: served by 1.28 and 1.32, v2 by 1.32 and 1.36; asked for one it lacks, a server answers
# the legacy form.
discovery("discovery/aggregated-api", "/api", DISCOVERY_V2BETA1)
discovery("discovery/aggregated-apis", "/apis", DISCOVERY_V2BETA1)
discovery("discovery/aggregated-v2-api", "/api", DISCOVERY_V2)
discovery("discovery/aggregated-v2-apis", "/apis", DISCOVERY_V2)


@probe("discovery/version")
async def _version(server: Server) -> Observation:
    response = await server.http.get("/version")
    body = response.json()
    return {
        "code": response.status_code,
        "content-type": response.headers.get("content-type"),
        "keys": sorted(body),
        "version": (body["major"], body["minor"], body["gitVersion"]),
    }


# ---------------------------------------------------------------------------- writes

CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"
NS_PODS = f"/api/v1/namespaces/{NS}/pods"


async def write(server: Server, method: str, path: str, body: Any = None, **kw: Any) -> Json:
    """A write that must succeed; its answer."""
    response = await server.http.request(method, path, json=body, **kw)
    assert response.status_code in (200, 201), f"{server.name} {method} {path}: {response.text}"
    answer: Json = response.json()
    return answer


async def remove(server: Server, path: str) -> None:
    """Delete ``path`` at once if it exists (pods without waiting for a kubelet)."""
    response = await server.http.delete(path, params={"gracePeriodSeconds": "0"})
    assert response.status_code in (200, 404), f"{server.name} DELETE {path}: {response.text}"


@contextlib.asynccontextmanager
async def made(server: Server, collection: str, body: Json) -> AsyncIterator[Json]:
    """An object created for a probe (any leftover of an earlier run replaced), deleted after."""
    path = f"{collection}/{body['metadata']['name']}"
    await remove(server, path)
    try:
        yield await write(server, "POST", collection, body)
    finally:
        await remove(server, path)


RV_PROBE = {"metadata": {"name": "rv-probe", "namespace": NS}, "data": {"n": "0"}}
"""A ConfigMap both servers hold, rewritten to move the storage's RV on."""


async def newest_rv(server: Server) -> int:
    """The storage's current RV, as a write makes it (the RV probe changed)."""
    patch = {"data": {"n": str(time.monotonic_ns())}}
    response = await _patch(server, f"{CONFIGMAPS}/rv-probe", patch)
    assert response.status_code == 200, response.text
    return _rv(response.json())


# ---------------------------------------------------------------------------- resource versions


@probe("rv/rv0-list-carries-the-resources-cache-rv")
async def _rv0_list(server: Server) -> Observation:
    latest = await newest_rv(server)
    pods = (await server.http.get(NS1_PODS, params={"resourceVersion": "0"})).json()
    params = {"resourceVersion": str(latest)}
    configmaps = (await server.http.get(CONFIGMAPS, params=params)).json()
    unset = (await server.http.get(NS1_PODS)).json()
    return {
        "rv: pods at rv 0 older than the latest write": _rv(pods) < latest,
        "rv: configmaps not older than their latest write": _rv(configmaps) >= latest,
        "rv: pods at rv unset not older than the latest write": _rv(unset) >= latest,
    }


@probe("rv/not-older-than-a-newer-rv-of-another-resource")
async def _newer_rv(server: Server) -> Observation:
    latest = await newest_rv(server)
    response = await server.http.get(NS1_PODS, params={"resourceVersion": str(latest)})
    return observe(server, NS1_PODS, response)


@probe("rv/not-older-than-the-resources-own-rv")
async def _own_rv(server: Server) -> Observation:
    await newest_rv(server)
    first = (await server.http.get(NS1_PODS, params={"resourceVersion": "0"})).json()
    params = {"resourceVersion": first["metadata"]["resourceVersion"]}
    obs = observe(server, NS1_PODS, await server.http.get(NS1_PODS, params=params))
    params["resourceVersionMatch"] = "NotOlderThan"
    again = observe(server, NS1_PODS, await server.http.get(NS1_PODS, params=params))
    return obs | {f"rvm.{k}": v for k, v in again.items()}


@probe("rv/exact-list-sees-the-past")
async def _exact(server: Server) -> Observation:
    obs: Observation = {}
    async with made(server, CONFIGMAPS, {"metadata": {"name": "exact-past"}}) as cm:
        before = _rv(cm)
    await newest_rv(server)
    for label, params in {
        "exact": {"resourceVersion": str(before), "resourceVersionMatch": "Exact"},
        "legacy-exact": {"resourceVersion": str(before), "limit": "50"},
        "not-older-than": {"resourceVersion": str(before), "resourceVersionMatch": "NotOlderThan"},
    }.items():
        response = await server.http.get(CONFIGMAPS, params=params)
        body = response.json()
        obs[f"{label}.code"] = response.status_code
        obs[f"{label}.items"] = [_name(i) for i in body.get("items", [])]
        if label != "not-older-than":
            obs[f"rv: {label} list at the rv asked"] = _rv(body) == before
    return obs


@probe("rv/get-at-a-future-rv")
async def _future_get(server: Server) -> Observation:
    latest = await newest_rv(server)
    params = {"resourceVersion": str(latest + 1000)}
    return observe(
        server, "/api/v1/nodes", await server.http.get("/api/v1/nodes/node-1", params=params)
    )


@probe("rv/exact-list-at-a-future-rv")
async def _future_exact(server: Server) -> Observation:
    latest = await newest_rv(server)
    params = {"resourceVersion": str(latest + 1000), "resourceVersionMatch": "Exact"}
    return observe(server, NS1_PODS, await server.http.get(NS1_PODS, params=params))


@probe("rv/events-at-a-future-rv")
async def _future_events(server: Server) -> Observation:
    latest = await newest_rv(server)
    path = "/api/v1/namespaces/ns-0/events"
    return observe(
        server, path, await server.http.get(path, params={"resourceVersion": str(latest + 1000)})
    )


# ---------------------------------------------------------------------------- compaction


@probe("compaction/continue-token-expires")
async def _continue_expires(server: Server) -> Observation:
    first = (await server.http.get(NS1_PODS, params={"limit": "5"})).json()
    await server.compact(await newest_rv(server))
    response = await server.http.get(
        NS1_PODS, params={"limit": "5", "continue": first["metadata"]["continue"]}
    )
    return observe(server, NS1_PODS, response)


@probe("compaction/exact-list-expires")
async def _exact_expires(server: Server) -> Observation:
    first = (await server.http.get(NS1_PODS)).json()
    await newest_rv(server)
    await server.compact(await newest_rv(server))
    obs: Observation = {}
    for label, params in {
        "exact": {
            "resourceVersion": first["metadata"]["resourceVersion"],
            "resourceVersionMatch": "Exact",
        },
        "legacy-exact": {"resourceVersion": first["metadata"]["resourceVersion"], "limit": "5"},
    }.items():
        response = await server.http.get(NS1_PODS, params=params)
        obs |= {f"{label}.{k}": v for k, v in observe(server, NS1_PODS, response).items()}
    return obs


@probe("compaction/watch-from-a-compacted-rv")
async def _watch_compacted(server: Server) -> Observation:
    old = await newest_rv(server)
    await newest_rv(server)
    await server.compact(await newest_rv(server))
    obs: Observation = {}
    for path in ("/api/v1/namespaces/ns-0/events", NS1_PODS):
        params = {"watch": "1", "resourceVersion": str(old), "timeoutSeconds": "1"}
        result = await read_watch(server, path, params, seconds=3)
        obs |= {
            f"{path}.{k}": v for k, v in observe_watch(result, since=old, initial=False).items()
        }
    return obs


# ---------------------------------------------------------------------------- watches


def _count(kinds: tuple[str, ...], n: int) -> Callable[[list[Json]], bool]:
    return lambda events: sum(e["type"] in kinds for e in events) >= n


@probe("watch/from-an-rv-sees-writes")
async def _watch_writes(server: Server) -> Observation:
    await remove(server, f"{CONFIGMAPS}/watched")
    since = _rv((await server.http.get(CONFIGMAPS)).json())

    async def writes() -> None:
        await write(server, "POST", CONFIGMAPS, {"metadata": {"name": "watched"}})
        await write(
            server, "PATCH", f"{CONFIGMAPS}/watched", content=b'{"data":{"a":"b"}}', headers=MERGE
        )
        await remove(server, f"{CONFIGMAPS}/watched")

    params = {"watch": "1", "resourceVersion": str(since)}
    result = await read_watch(
        server, CONFIGMAPS, params, until=_count(("ADDED", "MODIFIED", "DELETED"), 3), during=writes
    )
    return observe_watch(result, since=since, initial=False)


@probe("watch/label-selector-transitions")
async def _watch_transitions(server: Server) -> Observation:
    path = f"{CONFIGMAPS}/mover"
    await remove(server, path)
    since = _rv((await server.http.get(CONFIGMAPS)).json())

    def labelled(value: str) -> dict[str, Any]:
        return {
            "content": json.dumps({"metadata": {"labels": {"x": value}}}).encode(),
            "headers": MERGE,
        }

    async def writes() -> None:
        await write(
            server, "POST", CONFIGMAPS, {"metadata": {"name": "mover", "labels": {"x": "in"}}}
        )
        await write(server, "PATCH", path, **labelled("out"))
        await write(server, "PATCH", path, **labelled("out-still"))
        await write(server, "PATCH", path, **labelled("in"))
        await remove(server, path)

    params = {"watch": "1", "resourceVersion": str(since), "labelSelector": "x=in"}
    result = await read_watch(
        server, CONFIGMAPS, params, until=_count(("ADDED", "MODIFIED", "DELETED"), 4), during=writes
    )
    return observe_watch(result, since=since, initial=False)


@probe("watch/object-path-with-watch-is-a-get")
async def _watch_named(server: Server) -> Observation:
    path = f"{CONFIGMAPS}/named"
    await remove(server, path)
    # The RV the resource's cache is at (RV 0): a watch from it starts at once on every server;
    # etcd's current RV (RV unset) may be another resource's, which 1.28's cache can take
    # longer than its 3 s to reach on a busy machine (a 504).
    since = _rv((await server.http.get(CONFIGMAPS, params={"resourceVersion": "0"})).json())

    async def writes() -> None:
        await write(server, "POST", CONFIGMAPS, {"metadata": {"name": "other"}})
        await write(server, "POST", CONFIGMAPS, {"metadata": {"name": "named"}})
        await remove(server, f"{CONFIGMAPS}/other")
        await remove(server, path)

    params = {"watch": "1", "resourceVersion": str(since)}
    result = await read_watch(
        server, path, params, until=_count(("ADDED", "MODIFIED", "DELETED"), 2), during=writes
    )
    return observe_watch(result, since=since, initial=False)


for _name_, _params in {
    "watch/rv0-initial-state": {"resourceVersion": "0"},
    "watch/rv-unset-initial-state": {},
    "watch/rv0-with-bookmarks": {"resourceVersion": "0", "allowWatchBookmarks": "true"},
    "watch/rv0-label-selector": {"resourceVersion": "0", "labelSelector": "tier=frontend"},
    "watch/send-initial-events-false": {
        "resourceVersion": "0",
        "sendInitialEvents": "false",
        "resourceVersionMatch": "NotOlderThan",
    },
}.items():

    def _initial(params: dict[str, str]) -> Probe:
        async def run(server: Server) -> Observation:
            query = {"watch": "1", "timeoutSeconds": "1", **params}
            return observe_watch(await read_watch(server, NS1_PODS, query, seconds=4), initial=True)

        return run

    probe(_name_)(_initial(_params))


@probe("watch/bookmark-before-the-deadline")
async def _watch_deadline(server: Server) -> Observation:
    rv = _rv((await server.http.get(NS1_PODS, params={"resourceVersion": "0"})).json())
    params = {
        "watch": "1",
        "resourceVersion": str(rv),
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "3",
    }
    return observe_watch(
        await read_watch(server, NS1_PODS, params, seconds=6), since=rv, initial=False
    )


@probe("watch/from-a-future-rv")
async def _watch_future(server: Server) -> Observation:
    latest = await newest_rv(server)
    params = {"watch": "1", "resourceVersion": str(latest + 1000), "timeoutSeconds": "1"}
    return observe_watch(await read_watch(server, NS1_PODS, params, seconds=6), initial=False)


@probe("watch/table")
async def _watch_table(server: Server) -> Observation:
    await remove(server, f"{CONFIGMAPS}/tabled")
    since = _rv((await server.http.get(CONFIGMAPS)).json())

    async def writes() -> None:
        await write(server, "POST", CONFIGMAPS, {"metadata": {"name": "tabled"}})
        await remove(server, f"{CONFIGMAPS}/tabled")

    server.http.headers["Accept"] = TABLE_ACCEPT
    try:
        params = {"watch": "1", "resourceVersion": str(since)}
        result = await read_watch(
            server, CONFIGMAPS, params, until=lambda e: len(e) >= 2, during=writes
        )
    finally:
        del server.http.headers["Accept"]
    return {
        "code": result.code,
        "content-type": result.content_type,
        "events": [
            (
                e["type"],
                e["object"].get("kind"),
                len(e["object"].get("columnDefinitions") or []),
                [r["cells"][0] for r in e["object"].get("rows", [])],
            )
            for e in result.events
        ],
    }


@probe("watch/named-with-the-watch-prefix")
async def _watch_prefixed(server: Server) -> Observation:
    path = f"{CONFIGMAPS}/named"
    await remove(server, path)
    # The RV the resource's cache is at (RV 0): a watch from it starts at once on every server;
    # etcd's current RV (RV unset) may be another resource's, which 1.28's cache can take
    # longer than its 3 s to reach on a busy machine (a 504).
    since = _rv((await server.http.get(CONFIGMAPS, params={"resourceVersion": "0"})).json())

    async def writes() -> None:
        await write(server, "POST", CONFIGMAPS, {"metadata": {"name": "other"}})
        await write(server, "POST", CONFIGMAPS, {"metadata": {"name": "named"}})
        await remove(server, f"{CONFIGMAPS}/other")
        await remove(server, path)

    params = {"resourceVersion": str(since)}
    watch_path = f"/api/v1/watch/namespaces/{NS}/configmaps/named"
    result = await read_watch(
        server,
        watch_path,
        params,
        until=_count(("ADDED", "MODIFIED", "DELETED"), 2),
        during=writes,
    )
    return observe_watch(result, since=since, initial=False)


# Field and label selectors of other kinds.
request(
    "list/events-by-involved-object",
    "/api/v1/namespaces/ns-0/events",
    {"fieldSelector": "involvedObject.kind=Pod,type=Normal"},
)
request("list/namespaces-by-phase", "/api/v1/namespaces", {"fieldSelector": "status.phase=Active"})
request(
    "list/services-by-type",
    "/api/v1/namespaces/ns-0/services",
    {"fieldSelector": "spec.type=ClusterIP"},
)
request(
    "error/configmaps-field-unsupported",
    "/api/v1/namespaces/ns-0/configmaps",
    {"fieldSelector": "data.x=1"},
)
request(
    "error/deployments-field-unsupported",
    "/apis/apps/v1/deployments",
    {"fieldSelector": "spec.replicas=1"},
)
request(
    "list/label-selector-exists-and-not",
    "/api/v1/nodes",
    {"labelSelector": "kubernetes.io/arch,!node-role.kubernetes.io/control-plane"},
)


# ---------------------------------------------------------------------------- users


def as_user(
    name: str,
    user: str,
    method: str,
    path: str,
    params: dict[str, str] | None = None,
    body: Any = None,
) -> None:
    """A probe of one request as one of the test users (``anonymous``: no token; ``stranger``:
    a token nobody has)."""

    async def run(server: Server) -> Observation:
        headers = {"Authorization": ""}
        if user == "stranger":
            headers = {"Authorization": "Bearer not-a-known-token"}
        elif user != "anonymous":
            headers = server.users[user]
        async with httpx.AsyncClient(
            base_url=str(server.http.base_url), verify=server.verify, timeout=30
        ) as http:
            response = await http.request(
                method,
                path,
                params=params,
                json=body,
                headers={k: v for k, v in headers.items() if v},
            )
        return observe(server, path, response)

    probe(name)(run)


as_user("auth/reader-lists-its-namespace", "reader", "GET", "/api/v1/namespaces/team-a/configmaps")
as_user("auth/reader-lists-elsewhere", "reader", "GET", NS1_PODS)
as_user("auth/reader-lists-every-namespace", "reader", "GET", PODS)
as_user("auth/reader-watches-elsewhere", "reader", "GET", NS1_PODS, {"watch": "1"})
as_user("auth/reader-gets-a-node", "reader", "GET", "/api/v1/nodes/node-1")
as_user("auth/reader-gets-its-namespace", "reader", "GET", "/api/v1/namespaces/team-a")
as_user(
    "auth/reader-creates",
    "reader",
    "POST",
    "/api/v1/namespaces/team-a/configmaps",
    body={"metadata": {"name": "x"}},
)
as_user("auth/nobody-lists", "nobody", "GET", NS1_PODS)
as_user(
    "auth/nobody-gets-a-deployment",
    "nobody",
    "GET",
    "/apis/apps/v1/namespaces/ns-0/deployments/app-0",
)
as_user("auth/nobody-discovers", "nobody", "GET", "/api/v1")
as_user("auth/anonymous-lists", "anonymous", "GET", NS1_PODS)
as_user("auth/anonymous-version", "anonymous", "GET", "/version")
as_user("auth/anonymous-discovers", "anonymous", "GET", "/api")
as_user("auth/stranger-lists", "stranger", "GET", NS1_PODS)


@probe("auth/nobody-reviews-itself")
async def _self_review(server: Server) -> Observation:
    review = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "ns-1"}},
    }
    async with httpx.AsyncClient(
        base_url=str(server.http.base_url), verify=server.verify, timeout=30
    ) as http:
        response = await http.post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            json=review,
            headers=server.users["nobody"],
        )
    body = response.json()
    return {"code": response.status_code, "kind": body.get("kind"), "status": body.get("status")}


# ---------------------------------------------------------------------------- subresources

POD = {
    "metadata": {"name": "sub", "labels": {"app": "sub"}},
    "spec": {
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}
        ]
    },
    "status": {"phase": "Running"},
}
NODE = {"metadata": {"name": "differential-node"}, "spec": {"podCIDR": "10.1.0.0/24"}}


def _template(app: str) -> Json:
    return {
        "selector": {"matchLabels": {"app": app}},
        "template": {
            "metadata": {"labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    }


def _summary(body: Json, *paths: str) -> Observation:
    """The values at dotted ``paths`` of an object (or of a Status: its reason and message)."""
    if body.get("kind") == "Status":
        return _status(body)
    out: Observation = {}
    for path in paths:
        value: Any = body
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        out[path] = value
    return out


async def _patch(server: Server, path: str, patch: Json) -> httpx.Response:
    return await server.http.patch(path, content=json.dumps(patch).encode(), headers=MERGE)


def status_writes(
    name: str, collection: str, body: Json, *, spec: Json, status: Json, paths: tuple[str, ...]
) -> None:
    """A probe of the ``/status`` subresource and the main resource of one kind: what each
    write may change."""

    async def run(server: Server) -> Observation:
        obs: Observation = {}
        async with made(server, collection, body) as created:
            path = f"{collection}/{created['metadata']['name']}"
            obs["create"] = _summary(created, *paths)
            change = {
                "metadata": {"labels": {"by": "status"}, "annotations": {"by": "status"}},
                "spec": spec,
                "status": status,
            }
            response = await _patch(server, f"{path}/status", change)
            obs["status-patch.code"] = response.status_code
            obs["status-patch"] = _summary(response.json(), *paths)
            change = {
                "metadata": {"labels": {"by": "main"}},
                "spec": spec,
                "status": dict.fromkeys(status),
            }
            response = await _patch(server, path, change)
            obs["main-patch.code"] = response.status_code
            obs["main-patch"] = _summary(response.json(), *paths)
            current = (await server.http.get(path)).json()
            current["metadata"]["labels"] = {"by": "put"}
            current["status"] = {**current.get("status", {}), **status}
            response = await server.http.put(f"{path}/status", json=current)
            obs["status-put.code"] = response.status_code
            obs["status-put"] = _summary(response.json(), *paths)
            response = await server.http.get(f"{path}/status")
            obs |= prefixed("status-get", observe(server, collection, response))
            response = await server.http.post(f"{path}/status", json=current)
            obs |= prefixed("status-post", observe(server, collection, response))
        return obs

    probe(name)(run)


_COMMON = ("metadata.labels", "metadata.annotations.by", "metadata.generation")
status_writes(
    "status/pods",
    NS_PODS,
    POD,
    spec={"activeDeadlineSeconds": 30},
    status={"phase": "Succeeded", "message": "done"},
    paths=(
        *_COMMON,
        "spec.activeDeadlineSeconds",
        "status.phase",
        "status.message",
        "status.qosClass",
    ),
)
status_writes(
    "status/deployments",
    f"/apis/apps/v1/namespaces/{NS}/deployments",
    {
        "metadata": {"name": "sub"},
        "spec": {"replicas": 1, **_template("sub")},
        "status": {"replicas": 5},
    },
    spec={"replicas": 3},
    status={"replicas": 2, "observedGeneration": 1},
    paths=(*_COMMON, "spec.replicas", "status.replicas", "status.observedGeneration"),
)
status_writes(
    "status/replicasets",
    f"/apis/apps/v1/namespaces/{NS}/replicasets",
    {"metadata": {"name": "sub"}, "spec": {"replicas": 1, **_template("sub")}},
    spec={"replicas": 3},
    status={"replicas": 2},
    paths=(*_COMMON, "spec.replicas", "status.replicas"),
)
status_writes(
    "status/nodes",
    "/api/v1/nodes",
    NODE,
    spec={"unschedulable": True},
    status={"capacity": {"cpu": "4"}},
    paths=(*_COMMON, "spec.unschedulable", "status.capacity"),
)
status_writes(
    "status/services",
    f"/api/v1/namespaces/{NS}/services",
    {
        "metadata": {"name": "sub"},
        "spec": {"ports": [{"port": 80}], "clusterIP": "None", "sessionAffinity": "None"},
    },
    spec={"sessionAffinity": "ClientIP"},
    status={"loadBalancer": {"ingress": [{"ip": "10.9.9.9"}]}},
    paths=(*_COMMON, "spec.sessionAffinity", "status.loadBalancer"),
)
status_writes(
    "status/configmaps",
    CONFIGMAPS,
    {"metadata": {"name": "sub"}, "data": {"a": "b"}},
    spec={},
    status={"x": "y"},
    paths=("metadata.labels", "data"),
)


@probe("status/missing-object")
async def _status_missing(server: Server) -> Observation:
    response = await _patch(
        server, f"{NS_PODS}/no-such-pod/status", {"status": {"phase": "Running"}}
    )
    get = await server.http.get(f"{NS_PODS}/no-such-pod/status")
    return {"patch": observe(server, NS_PODS, response), "get": observe(server, NS_PODS, get)}


@probe("status/unknown-subresource")
async def _unknown_subresource(server: Server) -> Observation:
    response = await server.http.get("/api/v1/namespaces/ns-0/pods/x/logz")
    return observe(server, NS_PODS, response)


@probe("binding/pods")
async def _binding(server: Server) -> Observation:
    obs: Observation = {}
    unbound = {**POD, "metadata": {"name": "unbound"}}
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "unbound", "annotations": {"bound-by": "probe"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    async with made(server, NS_PODS, unbound):
        path = f"{NS_PODS}/unbound"
        response = await server.http.post(f"{path}/binding", json=binding)
        obs["bind"] = observe(server, NS_PODS, response)
        obs["bind.body"] = response.json()
        pod = (await server.http.get(path)).json()
        obs["bound"] = _summary(pod, "spec.nodeName", "metadata.annotations")
        obs["bound.conditions"] = [
            (c["type"], c["status"]) for c in pod.get("status", {}).get("conditions", [])
        ]
        obs["again"] = observe(
            server, NS_PODS, await server.http.post(f"{path}/binding", json=binding)
        )
        other = {**binding, "metadata": {"name": "other"}}
        obs["wrong-name"] = observe(
            server, NS_PODS, await server.http.post(f"{path}/binding", json=other)
        )
        obs["get"] = observe(server, NS_PODS, await server.http.get(f"{path}/binding"))
    missing = {**binding, "metadata": {"name": "no-such-pod"}}
    obs["missing"] = observe(
        server, NS_PODS, await server.http.post(f"{NS_PODS}/no-such-pod/binding", json=missing)
    )
    return obs


@probe("create/ignores-status")
async def _create_status(server: Server) -> Observation:
    obs: Observation = {}
    async with made(server, NS_PODS, POD) as pod:
        obs["pod"] = _summary(pod, "status.phase", "status.qosClass", "metadata.generation")
    deployment = {
        "metadata": {"name": "sub"},
        "spec": {"replicas": 1, **_template("sub")},
        "status": {"replicas": 5},
    }
    async with made(server, f"/apis/apps/v1/namespaces/{NS}/deployments", deployment) as created:
        obs["deployment"] = _summary(created, "status", "metadata.generation")
    return obs


# ---------------------------------------------------------------------------- watch-list

WATCH_LIST = {
    "watch": "1",
    "sendInitialEvents": "true",
    "resourceVersionMatch": "NotOlderThan",
    "allowWatchBookmarks": "true",
}


class EventStream:
    """A watch response's events as they come, read by a task of its own (so waiting for them
    with a timeout never cuts a read in half)."""

    def __init__(self, response: httpx.Response) -> None:
        self._queue: asyncio.Queue[Json | None] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read(response), name="differential-watch-reader")

    async def _read(self, response: httpx.Response) -> None:
        try:
            async for line in response.aiter_lines():
                if line.strip():
                    await self._queue.put(json.loads(line))
        except httpx.HTTPError:
            pass
        finally:
            await self._queue.put(None)

    async def take(self, seconds: float, until: Callable[[Json], bool]) -> list[Json]:
        """Events until one satisfies ``until``, the stream ends or ``seconds`` pass."""
        events: list[Json] = []
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while (event := await self._queue.get()) is not None:
                    events.append(event)
                    if until(event):
                        break
        return events

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def event_stream(
    server: Server, path: str, params: dict[str, str]
) -> AsyncIterator[tuple[int, EventStream]]:
    async with server.http.stream("GET", path, params=params) as response:
        stream = EventStream(response)
        try:
            yield response.status_code, stream
        finally:
            await stream.close()


def _brief(events: list[Json]) -> list[Any]:
    return [
        (e["type"], e["object"]["metadata"].get("annotations"))
        if e["type"] == "BOOKMARK"
        else (e["type"], _name(e["object"]))
        for e in events
    ]


@probe("watchlist/end-bookmark-once-the-cache-catches-up", table=WATCHLIST_PROBES)
async def _late_bookmark(server: Server) -> Observation:
    await remove(server, f"{NS_PODS}/wake")
    await newest_rv(server)  # the storage moves on; the pods' cache has not seen it
    expected = len([k for c, k in server.known if c == "pods" and k.startswith("ns-1/")])
    obs: Observation = {}
    params = {**WATCH_LIST, "timeoutSeconds": "30"}
    async with event_stream(server, NS1_PODS, params) as (code, stream):
        obs["code"] = code
        initial: list[Json] = []
        while sum(e["type"] == "ADDED" for e in initial) < expected:
            more = await stream.take(5, lambda _: True)
            if not more:
                break
            initial += more
        obs["initial"] = sorted(_name(e["object"]) for e in initial if e["type"] == "ADDED")
        obs["with the initial events"] = _brief([e for e in initial if e["type"] != "ADDED"])
        obs["before a write"] = _brief(await stream.take(1.5, lambda e: e["type"] == "BOOKMARK"))
        async with made(server, NS_PODS, {**POD, "metadata": {"name": "wake"}}):
            obs["after a pod's write"] = _brief(
                await stream.take(5, lambda e: e["type"] == "BOOKMARK")
            )
    return obs


def watch_list(name: str, path: str, params: dict[str, str]) -> None:
    async def run(server: Server) -> Observation:
        # The API server sends bookmarks on a timer (~1 s): the stream stays open for some.
        query = {"timeoutSeconds": "5", **params}
        result = await read_watch(
            server, path, query, seconds=8, until=lambda e: bool(e) and e[-1]["type"] == "BOOKMARK"
        )
        return observe_watch(result, initial=True)

    probe(name, table=WATCHLIST_PROBES)(run)


watch_list("watchlist/rv0", NS1_PODS, {**WATCH_LIST, "resourceVersion": "0"})
watch_list(
    "watchlist/without-bookmarks",
    NS1_PODS,
    {k: v for k, v in WATCH_LIST.items() if k != "allowWatchBookmarks"},
)
watch_list("watchlist/events", "/api/v1/namespaces/ns-0/events", WATCH_LIST)
watch_list(
    "watchlist/legacy-watch-rv0",
    NS1_PODS,
    {"watch": "1", "resourceVersion": "0", "allowWatchBookmarks": "true"},
)
watch_list(
    "watchlist/send-initial-events-false",
    NS1_PODS,
    {**WATCH_LIST, "sendInitialEvents": "false", "resourceVersion": "0"},
)
request(
    "watchlist/rvm-exact",
    NS1_PODS,
    {**WATCH_LIST, "resourceVersionMatch": "Exact"},
    table=WATCHLIST_PROBES,
)


# ---------------------------------------------------------------------------- more writes and wire


def write_request(name: str, method: str, path: str, body: Any, **headers: str) -> None:
    """A probe of one write that fails the same way on every run (nothing is made)."""

    async def run(server: Server) -> Observation:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        response = await server.http.request(method, path, content=content, headers=headers)
        return observe(server, path, response)

    probe(name)(run)


JSON = {"Content-Type": "application/json"}
write_request("write/create-existing", "POST", CONFIGMAPS, RV_PROBE, **JSON)
write_request(
    "write/create-bad-name", "POST", CONFIGMAPS, {"metadata": {"name": "Not_Valid"}}, **JSON
)
write_request("write/create-no-name", "POST", CONFIGMAPS, {"metadata": {}}, **JSON)
write_request(
    "write/create-other-namespace",
    "POST",
    CONFIGMAPS,
    {"metadata": {"name": "x", "namespace": "ns-0"}},
    **JSON,
)
write_request(
    "write/create-missing-namespace",
    "POST",
    "/api/v1/namespaces/no-such-namespace/configmaps",
    {"metadata": {"name": "x"}},
    **JSON,
)
write_request(
    "write/create-wrong-kind",
    "POST",
    CONFIGMAPS,
    {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "x"}},
    **JSON,
)
write_request("write/create-not-json", "POST", CONFIGMAPS, b"{nope", **JSON)
write_request(
    "write/update-stale",
    "PUT",
    f"{CONFIGMAPS}/rv-probe",
    {**RV_PROBE, "metadata": {**RV_PROBE["metadata"], "resourceVersion": "1"}},
    **JSON,
)
write_request(
    "write/update-missing",
    "PUT",
    f"{CONFIGMAPS}/no-such",
    {"metadata": {"name": "no-such"}},
    **JSON,
)
write_request(
    "write/update-name-mismatch",
    "PUT",
    f"{CONFIGMAPS}/rv-probe",
    {"metadata": {"name": "other"}},
    **JSON,
)
write_request("write/delete-missing", "DELETE", f"{CONFIGMAPS}/no-such", b"")
write_request(
    "write/patch-unsupported-type", "PATCH", f"{CONFIGMAPS}/rv-probe", {"data": {}}, **JSON
)
write_request(
    "write/json-patch-bad-path",
    "PATCH",
    f"{CONFIGMAPS}/rv-probe",
    [{"op": "replace", "path": "/data/missing", "value": "x"}],
    **{"Content-Type": "application/json-patch+json"},
)
write_request("write/patch-missing", "PATCH", f"{CONFIGMAPS}/no-such", {"data": {}}, **MERGE)
write_request(
    "write/json-patch-failing-test",
    "PATCH",
    f"{CONFIGMAPS}/rv-probe",
    [{"op": "test", "path": "/data/n", "value": "never"}],
    **{"Content-Type": "application/json-patch+json"},
)
write_request(
    "write/json-patch-not-a-list",
    "PATCH",
    f"{CONFIGMAPS}/rv-probe",
    {"op": "test"},
    **{"Content-Type": "application/json-patch+json"},
)


@probe("write/delete-collection")
async def _delete_collection(server: Server) -> Observation:
    for name in ("dc-a", "dc-b", "dc-c"):
        await remove(server, f"{CONFIGMAPS}/{name}")
        labels = {"dc": "yes" if name != "dc-b" else "no"}
        await write(server, "POST", CONFIGMAPS, {"metadata": {"name": name, "labels": labels}})
    response = await server.http.delete(CONFIGMAPS, params={"labelSelector": "dc=yes"})
    obs = observe(server, CONFIGMAPS, response)
    await remove(server, f"{CONFIGMAPS}/dc-b")
    return obs


@probe("wire/pretty-for-curl")
async def _pretty(server: Server) -> Observation:
    response = await server.http.get(
        "/api/v1/namespaces/ns-1", headers={"User-Agent": "curl/8.5.0"}
    )
    text = response.text
    return {
        "code": response.status_code,
        "indented": text.startswith('{\n  "kind": "Namespace",\n'),
        "ends with a newline": text.endswith("}\n"),
    }


@probe("wire/gzip-for-a-large-list")
async def _gzip(server: Server) -> Observation:
    response = await server.http.get(PODS, headers={"Accept-Encoding": "gzip"})
    small = await server.http.get("/api/v1/nodes/node-1", headers={"Accept-Encoding": "gzip"})
    return {
        "code": response.status_code,
        "content-encoding": response.headers.get("content-encoding"),
        "small content-encoding": small.headers.get("content-encoding"),
    }


request(
    "rv/not-older-than-rv0-with-limit",
    NS1_PODS,
    {"resourceVersion": "0", "resourceVersionMatch": "NotOlderThan", "limit": "3"},
)
request(
    "get/pod-rv0",
    "/api/v1/namespaces/ns-1/pods",
    {"resourceVersion": "0", "fieldSelector": "metadata.name=nope"},
)


# ---------------------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class Known:
    probes: str
    """fnmatch pattern of the probe ids it shows in."""
    aspects: tuple[str, ...]
    """fnmatch patterns of the aspects that differ."""
    reason: str
    wherever: bool = False
    """Allowed wherever it shows, not required to show (else a probe it names must show it)."""
    servers: tuple[str, ...] = ()
    """The server versions it shows against (``1.28``); empty: every one."""


_UNSERVED_SUBRESOURCES = (
    "resize",  # 1.32
    "attach",
    "ephemeralcontainers",
    "eviction",
    "exec",
    "finalize",
    "log",
    "portforward",
    "proxy",
    "scale",
    "token",
)

KNOWN: list[Known] = [
    Known(
        "*",
        ("*managedFields",),
        "the simulator does no server-side field management: an object has the managedFields "
        "it was written with (the demo objects' are generated), none for what a request wrote",
        wherever=True,
    ),
    Known(
        "discovery/api-v1",
        tuple(f"resource */{sub}" for sub in _UNSERVED_SUBRESOURCES),
        "the simulator serves (and lists) only the status and binding subresources",
    ),
    Known(
        "discovery/apps-v1",
        tuple(f"resource */{sub}" for sub in _UNSERVED_SUBRESOURCES),
        "the simulator serves (and lists) only the status and binding subresources",
    ),
    Known(
        "discovery/aggregated-ap*",
        tuple(f"*/{sub}" for sub in _UNSERVED_SUBRESOURCES),
        "the simulator serves (and lists) only the status and binding subresources",
        servers=("1.28", "1.32"),
    ),
    Known(
        "discovery/aggregated-v2-*",
        tuple(f"*/{sub}" for sub in _UNSERVED_SUBRESOURCES),
        "the simulator serves (and lists) only the status and binding subresources",
        servers=("1.32", "1.36"),
    ),
    Known(
        "error/rv-not-a-number",
        ("code", "status"),
        "1.28 and 1.32 answer an RV that is not a number with a 500 without reason; 1.36 (and the "
        "simulator) with a 400 BadRequest, the same message (1.36: after 'invalid resource "
        "version: ')",
        servers=("1.28", "1.32"),
    ),
    Known(
        "error/unknown-group",
        ("content-type", "text", "status", "status.*"),
        "1.28 answers an unknown API group with a plain-text `404 page not found`; the simulator "
        "with a NotFound Status (clients accept both)",
    ),
    Known(
        "list/services-by-type",
        ("code", "status", "status.*", "kind", "items*", "list.*", "rv: *"),
        "1.28 selects Services by metadata.name and metadata.namespace only; the simulator (as "
        "current servers) also by spec.type and spec.clusterIP",
    ),
    Known(
        "write/create-not-json",
        ("status.message",),
        "a body that is not JSON: the API server quotes Go's JSON decoder, the simulator Python's",
    ),
    Known(
        "status/services",
        ("main-patch",),
        "kube-apiserver clears the load balancer status of a Service that is not of type "
        "LoadBalancer on every update of the main resource; the simulator keeps the status "
        "(1.32 refuses such a status in the first place, as the simulator does)",
        servers=("1.28",),
    ),
    Known(
        "watchlist/end-bookmark-once-the-cache-catches-up",
        ("after a pod's write",),
        "1.32 and 1.36 may send one more plain bookmark at the next write of the resource "
        "elsewhere after a watch-list's end bookmark (seen when the watch-list's RV was ahead "
        "of its cache); the simulator sends the next regular one",
        wherever=True,
        servers=("1.32", "1.36"),
    ),
]
"""Every difference between the simulator and kube-apiserver 1.28 that is accepted, and why
(docs/simulator.md lists them for users)."""


def _differences(real: Observation, sim: Observation) -> dict[str, tuple[Any, Any]]:
    return {
        a: (real.get(a), sim.get(a))
        for a in sorted(real.keys() | sim.keys())
        if real.get(a) != sim.get(a)
    }


def check(name: str, real: Observation, sim: Observation, *, server: str) -> None:
    differences = _differences(real, sim)
    known = [
        k
        for k in KNOWN
        if fnmatch.fnmatchcase(name, k.probes) and (not k.servers or server in k.servers)
    ]

    def explains(k: Known, aspect: str) -> bool:
        return any(fnmatch.fnmatchcase(aspect, p) for p in k.aspects)

    unexplained = {a: v for a, v in differences.items() if not any(explains(k, a) for k in known)}
    stale = [
        k.reason for k in known if not k.wherever and not any(explains(k, a) for a in differences)
    ]
    report = "\n".join(
        f"  {a}:\n    real: {r!r}\n    sim:  {s!r}" for a, (r, s) in unexplained.items()
    )
    assert not unexplained, f"{name} ({server}): differences not in KNOWN:\n{report}"
    assert not stale, f"{name} ({server}): listed in KNOWN but no longer different: {stale}"


def _policy(users: Mapping[str, User], reader_namespace: str) -> Policy:
    """The cluster's users and RBAC, for the simulator: the same tokens and groups, ``reader``
    reading everything in its namespace (``Cluster``'s Role and RoleBinding)."""
    return Policy.from_mapping(
        {
            "users": [
                {"name": u.name, "token": u.token, "groups": list(u.groups)} for u in users.values()
            ],
            "rules": [
                {
                    "name": "reader",
                    "subjects": [{"kind": "User", "name": "reader"}],
                    "verbs": ["get", "list", "watch"],
                    "apiGroups": ["*"],
                    "resources": ["*"],
                    "namespaces": [reader_namespace],
                }
            ],
        }
    )


def _config(cluster: Cluster, *, watch_list: bool) -> SimConfig:
    """The simulator as ``cluster``'s version (1.28: with the ``WatchList`` gate when
    ``watch_list``; 1.32 and 1.36 have it on), knowing its users."""
    policy = _policy(cluster.users, cluster.reader_namespace)
    if cluster.assets.minor < (1, 32):
        return SimConfig.kube_1_28(watch_list=watch_list, policy=policy)
    # Reporting the real server's version (a pre-release build of 1.32, a fork's 1.36).
    preset = SimConfig.kube_1_32 if cluster.assets.minor < (1, 36) else SimConfig.kube_1_36
    return preset(git_version=cluster.assets.git_version, policy=policy)


@contextlib.asynccontextmanager
async def simulated(cluster: Cluster, *, watch_list: bool) -> AsyncIterator[Server]:
    """A simulator as ``cluster``'s kube-apiserver version, holding what ``cluster`` was seeded
    with and knowing its users."""
    config = _config(cluster, watch_list=watch_list)
    sim = Simulator(config=config)
    sim.load(demo())
    sim.load(
        [
            ("namespaces", {"metadata": {"name": NS}}),
            ("namespaces", {"metadata": {"name": cluster.reader_namespace}}),
            ("configmaps", RV_PROBE),
        ]
    )
    known = _known_keys(sim)

    async def compact(rv: int) -> None:
        sim.compact_storage(rv)

    users = {name: user.headers for name, user in cluster.users.items()}
    async with (
        SimServer(sim) as server,
        httpx.AsyncClient(base_url=server.url, headers=users["admin"], timeout=30) as http,
    ):
        yield Server("sim", http, compact, server.restart, known, users=users)


@contextlib.asynccontextmanager
async def real(cluster: Cluster, known: frozenset[tuple[str, str]]) -> AsyncIterator[Server]:
    async def compact(rv: int) -> None:
        await asyncio.to_thread(cluster.compact, rv)

    async def restart() -> None:
        await asyncio.to_thread(cluster.restart_apiserver)

    users = {name: user.headers for name, user in cluster.users.items()}
    async with cluster.async_client() as http:
        yield Server("real", http, compact, restart, known, cluster.ssl_context(), users)


_PREPARED: set[str] = set()
"""The clusters (by URL) whose probe namespace was made in this session."""


def _prepared(cluster: Cluster) -> str:
    """The namespace of the probes that write, and the RV probe in it (once per cluster)."""
    if cluster.url not in _PREPARED:
        cluster.create_namespace(NS)
        with cluster.client() as client:
            response = client.post(f"/api/v1/namespaces/{NS}/configmaps", json=RV_PROBE)
            assert response.status_code in (201, 409), response.text
        _PREPARED.add(cluster.url)
    return NS


@pytest.fixture
def differential_namespace(cluster: Cluster) -> str:
    return _prepared(cluster)


@pytest.fixture
def watchlist_namespace(watchlist_cluster: Cluster) -> str:
    return _prepared(watchlist_cluster)


async def _compare(
    name: str, table: dict[str, Probe], cluster: Cluster, *, watch_list: bool
) -> None:
    async with simulated(cluster, watch_list=watch_list) as sim, real(cluster, sim.known) as up:
        real_obs, sim_obs = await asyncio.gather(table[name](up), table[name](sim))
    check(name, real_obs, sim_obs, server=cluster.assets.version)


@pytest.mark.parametrize("name", sorted(PROBES))
async def test_the_simulator_answers_as_the_api_server(
    name: str, cluster: Cluster, differential_namespace: str
) -> None:
    await _compare(name, PROBES, cluster, watch_list=False)


@pytest.mark.parametrize("name", sorted(WATCHLIST_PROBES))
async def test_with_watch_list_the_simulator_answers_as_the_api_server(
    name: str, watchlist_cluster: Cluster, watchlist_namespace: str
) -> None:
    await _compare(name, WATCHLIST_PROBES, watchlist_cluster, watch_list=True)


async def _after_a_restart(server: Server) -> Observation:
    before = await newest_rv(server)
    await newest_rv(server)  # history the restarted caches will not have
    await server.restart()
    await server.http.aclose()
    async with httpx.AsyncClient(
        base_url=str(server.http.base_url),
        headers=server.http.headers,
        verify=server.verify,
        timeout=30,
    ) as http:
        server.http = http
        params = {"watch": "1", "resourceVersion": str(before), "timeoutSeconds": "1"}
        for _ in range(50):  # a restarted API server answers 429 until its caches are ready
            watch = await read_watch(server, NS1_PODS, params, seconds=5)
            if watch.code != 429:
                break
            await asyncio.sleep(0.1)
        assert len(watch.events) == 1, (server.name, watch)
        (error,) = watch.events
        too_old = re.fullmatch(
            r"too old resource version: (\d+) \((\d+)\)", error["object"]["message"]
        )
        assert too_old is not None, error
        exact = {"resourceVersion": str(before), "resourceVersionMatch": "Exact"}
        rv0 = (await server.http.get(NS1_PODS, params={"resourceVersion": "0"})).json()
        return {
            "watch from before": observe_watch(watch, initial=False),
            "rv: the watch cache starts at the restart": int(too_old.group(2)) >= before,
            "exact list from before": observe(
                server, NS1_PODS, await server.http.get(NS1_PODS, params=exact)
            ),
            "rv: a list at rv 0 is at the restart": _rv(rv0) >= before,
        }


async def test_after_a_restart_the_simulator_answers_as_the_api_server(
    cluster: Cluster, differential_namespace: str
) -> None:
    # Restarts the session's API server: the last test of the module, so nothing after it here
    # depends on its watch caches' history.
    async with simulated(cluster, watch_list=False) as sim, real(cluster, sim.known) as up:
        real_obs, sim_obs = await asyncio.gather(_after_a_restart(up), _after_a_restart(sim))
    check("restart", real_obs, sim_obs, server=cluster.assets.version)
