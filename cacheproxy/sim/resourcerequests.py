"""Serving one request on a resource path of the simulator: which verb it is, whether the user
may, the request's record, an injected failure, then the verb — read (list, get), write, or
watch (:mod:`cacheproxy.sim.watchserving`).

A path's type and scope are checked as the API server checks them (a namespaced path for a
cluster-scoped resource, or a named one without its namespace, is a 404); the verbs themselves
are :class:`~cacheproxy.sim.api.SimApi`'s; the form of an answer, :mod:`cacheproxy.sim.render`'s.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.attributes import UserInfo
from cacheproxy.kube.fields import validate_field_selector
from cacheproxy.kube.listoptions import ListOptions, parse_list_options
from cacheproxy.kube.protobuf import PROTOBUF
from cacheproxy.kube.protoobjects import DECODED_KINDS, decode_object
from cacheproxy.kube.request import ApiPath
from cacheproxy.kube.resources import ResourceRegistry, ResourceType
from cacheproxy.kube.versions import KubeVersion
from cacheproxy.serving import Request, Send
from cacheproxy.sim import render, statuses
from cacheproxy.sim.api import SimApi
from cacheproxy.sim.faults import Faults
from cacheproxy.sim.render import JSON_ANSWERS
from cacheproxy.sim.requestauth import SimAccess
from cacheproxy.sim.simconfig import SimConfig
from cacheproxy.sim.storage import SimStore
from cacheproxy.sim.verbs import resource_verb
from cacheproxy.sim.watchserving import serve_watch
from cacheproxy.sim.writes import PATCH_TYPES

__all__ = ["RequestRecord", "Served", "list_options", "serve_resource"]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One API request as the simulator saw it."""

    verb: str
    resource: str
    namespace: str | None
    name: str | None
    params: dict[str, str]
    user: str | None = None
    """Who the simulator authenticated (None without a policy): its audit log's username."""


class Served(Protocol):
    """What a resource request is answered from (the :class:`~cacheproxy.sim.simulator.Simulator`
    is one): its resources, who may do what, its API over the store, the faults to inject, the
    request counts and log."""

    config: SimConfig
    registry: ResourceRegistry
    review_registry: ResourceRegistry
    access: SimAccess
    api: SimApi
    store: SimStore
    faults: Faults
    stopping: bool
    requests: Counter[str]
    request_log: deque[RequestRecord]

    @property
    def kube_version(self) -> KubeVersion: ...


async def serve_resource(
    sim: Served, req: Request, send: Send, path: ApiPath, user: UserInfo | None
) -> None:
    """Answer a request on a resource path (``user``: who sent it, None without a policy)."""
    gv = path.group_version
    namespace, name, sub = path.namespace, path.name, path.subresource
    rtype = sim.registry.get_gvr(gv.group, gv.version, path.resource or "")
    if rtype is None:
        review = sim.review_registry.get_gvr(gv.group, gv.version, path.resource or "")
        if review is not None and req.method == "POST" and name is None and sub is None:
            await sim.access.review(
                req, send, review, user, faults=sim.faults, answers=JSON_ANSWERS
            )
            return
        raise status.resource_not_found()
    if namespace is not None and not rtype.namespaced:
        raise status.resource_not_found()
    if name is not None and rtype.namespaced and namespace is None:
        raise status.resource_not_found()
    query = req.query
    verb = resource_verb(req.method, path, query, rtype)
    sim.access.authorize(user, verb, rtype, namespace or "", name or "", sub or "")
    sim.requests[verb] += 1
    sim.requests[f"{verb} {rtype.qualified}"] += 1
    sim.request_log.append(
        RequestRecord(
            verb=verb,
            resource=rtype.qualified,
            namespace=namespace,
            name=name,
            params={k: v[0] for k, v in query.items() if v},
            user=user.name if user is not None else None,
        )
    )
    failure = sim.faults.take_failure(
        verb if verb in ("watch", "list", "get", "create") else "any"  # type: ignore[arg-type]
    )
    if failure is not None and not (verb == "watch" and failure.code == 410):
        raise failure

    api = sim.api
    if verb == "watch":
        opts = list_options(sim, rtype, req, watch=True, name=name)
        await serve_watch(sim, req, send, rtype, namespace, opts, forced_error=failure)
    elif verb == "list":
        opts = list_options(sim, rtype, req, watch=False)
        result = await api.list(rtype, namespace, opts)
        form = render.negotiate(req.header("accept"), req.query, verb="list", kube=sim.kube_version)
        await JSON_ANSWERS.send(send, req, render.list_body(result, form))
    elif verb == "get":
        assert name is not None
        body = await api.get(rtype, namespace, name, req.param("resourceVersion"))
        form = render.negotiate(req.header("accept"), req.query, verb="get", kube=sim.kube_version)
        await JSON_ANSWERS.send(send, req, render.object_body(rtype, body, form))
    elif verb == "create" and sub == "binding":
        assert name is not None
        answer = api.bind(rtype, namespace, name, await _object(req))
        await JSON_ANSWERS.send(send, req, orjson.dumps(answer), code=201)
    elif verb == "create":
        obj = api.create(rtype, namespace, await _object(req))
        await JSON_ANSWERS.send(send, req, orjson.dumps(obj), code=201)
    elif verb == "update":
        assert name is not None
        obj = api.update(rtype, namespace, name, await _object(req), subresource=sub)
        await JSON_ANSWERS.send(send, req, orjson.dumps(obj))
    elif verb == "patch":
        assert name is not None
        ctype = req.header("content-type").split(";")[0].strip()
        if ctype not in PATCH_TYPES:
            raise statuses.unsupported_media_type()
        body = await req.json()
        obj = api.patch(rtype, namespace, name, ctype, body, subresource=sub)
        await JSON_ANSWERS.send(send, req, orjson.dumps(obj))
    elif verb == "delete":
        assert name is not None
        obj = api.delete(rtype, namespace, name)
        await JSON_ANSWERS.send(send, req, orjson.dumps(obj))
    else:  # deletecollection
        opts = list_options(sim, rtype, req, watch=False)
        await JSON_ANSWERS.send(send, req, api.delete_collection(rtype, namespace, opts))


async def _object(req: Request) -> Any:
    """A create's or update's object: JSON, or protobuf (kubectl 1.32+'s typed clients send it)
    of the kinds :mod:`cacheproxy.kube.protoobjects` reads; another kind in protobuf is a 415 (a
    known difference: the API server decodes every built-in kind)."""
    ctype = req.header("content-type").split(";")[0].strip().lower()
    if ctype != PROTOBUF:
        return await req.json()
    obj = decode_object(await req.body())
    if obj is None:
        raise statuses.unsupported_media_type(
            "the simulator decodes protobuf request bodies of "
            f"{', '.join(sorted(DECODED_KINDS))} only (the API server decodes every built-in "
            "kind): send the object as JSON (kubectl create -f FILE)"
        )
    return obj


def list_options(
    sim: Served,
    rtype: ResourceType,
    req: Request,
    *,
    watch: bool,
    name: str | None = None,
) -> ListOptions:
    """The request's list or watch options, refused as the API server refuses them (a
    watch-list while the ``WatchList`` gate is off among them)."""
    watch_list = sim.config.watch_list
    try:
        opts = parse_list_options(req.query, watch=watch, name=name, kube=sim.kube_version)
    except ApiError as err:
        if err.code == 422 and watch and not watch_list:
            raise _without_watch_list(err) from None
        raise
    if opts.watch and opts.send_initial_events is not None and not watch_list:
        raise _without_watch_list(None)
    validate_field_selector(rtype, opts.field_selector)
    return opts


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
