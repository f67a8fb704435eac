"""cacheproxy's own API, under ``/cacheproxy/`` (a prefix no Kubernetes path uses), on FastAPI:
the cache's status, the configuration in effect (secrets never shown), each served resource's
indexes with their cardinality and most common values, and which objects have an index value —
plain JSON, described by OpenAPI at ``/cacheproxy/openapi.json`` and ``/cacheproxy/docs``.

FastAPI earns its place here and only here: these are low-rate endpoints for people and tools,
and it gives typed parameters, their validation and the OpenAPI description for free. It costs
about a quarter of a second to import and ~8 MiB of memory, and ~0.2 ms a request (several times
a raw handler's): so the Kubernetes paths never reach it (:class:`~.app.CacheServer` hands it
only paths under :data:`PREFIX`, after the same bounds, authentication, authorization and
in-flight limit as every request), and this module imports FastAPI only inside
:func:`build_api`, which the server calls on the first request here (:class:`LazyApi`): a
restart reaches ready without paying for it (docs/operations.md, "Warm restarts").

Access: every path here is authorized as a non-resource URL (``get`` on
``/cacheproxy/v1/…``, as the API server authorizes ``/metrics``). What names objects or index
values of a resource (its indexes, their values, the objects having one) also needs ``list`` on
that resource across all namespaces: it shows what such a list would show. Errors are
``metav1.Status`` bodies, as everywhere else.

No ``from __future__ import annotations`` here: FastAPI reads the endpoints' annotations.
"""

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import BaseModel, Field

from cacheproxy import __version__
from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.attributes import ResourceAttributes, UserInfo
from cacheproxy.kube.resources import ResourceType
from cacheproxy.server.access import AccessControl
from cacheproxy.server.indexquery import (
    IndexSummary,
    ObjectRef,
    ValueCount,
    objects_with,
    summarize,
    value_counts,
)
from cacheproxy.server.resource import ServedResource

if TYPE_CHECKING:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

__all__ = ["PREFIX", "USER", "CacheView", "LazyApi", "build_api"]

PREFIX = "/cacheproxy"
USER = "cacheproxy.user"
"""The scope key under which the server hands the request's authenticated user to the API."""


class CacheView(Protocol):
    """What the API reads of the cache (the :class:`~cacheproxy.server.app.CacheServer` is
    one): the served resources, who may read them, and the status document."""

    @property
    def resources(self) -> Mapping[ResourceType, ServedResource]: ...

    @property
    def access(self) -> AccessControl | None: ...

    def status_page(self) -> dict[str, Any]: ...


DESCRIPTION = """\
cacheproxy's own API, beside the Kubernetes API paths it serves from its cache: the cache's
status, the configuration in effect (secrets never shown), each resource's indexes, and which
objects have an index value, in plain JSON.

Every path is authorized like `/metrics` (a non-resource URL, verb `get`) when the daemon
authenticates its clients; what names a resource's objects or index values also needs `list`
on that resource in all namespaces. Errors are Kubernetes `Status` objects.
"""

_REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed"}


class IndexInfo(BaseModel):
    path: str = Field(description="The indexed field path, as configured.")
    cardinality: int = Field(description="Distinct values the index holds now.")


class ResourceInfo(BaseModel):
    name: str = Field(description="The resource as the configuration names it.")
    qualified: str = Field(description="`plural` or `plural.group`, as used in these paths.")
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    synced: bool
    objects: int
    indexes: list[IndexInfo]


class ResourceIndexes(BaseModel):
    resource: str
    indexes: list[IndexSummary]


class IndexValues(BaseModel):
    resource: str
    index: str
    cardinality: int
    values: list[ValueCount] = Field(description="Most objects first; ties in value order.")


class IndexObjects(BaseModel):
    resource: str
    index: str
    values: list[str] = Field(description="The values asked for (an object matches any).")
    count: int
    objects: list[ObjectRef] = Field(description="In key order (namespace, then name).")


def _status_response(err: ApiError) -> "JSONResponse":
    from fastapi.responses import JSONResponse

    headers = {"Retry-After": str(err.retry_after)} if err.retry_after else None
    return JSONResponse(dict(err.status), status_code=err.code, headers=headers)


def _error(code: int, message: str) -> "JSONResponse":
    body = status.status_body(code=code, reason=_REASONS.get(code), message=message, details={})
    return _status_response(ApiError(body))


def _serve_docs(api: "FastAPI") -> None:
    """``/cacheproxy/docs``: Swagger UI (5, which reads OpenAPI 3.1) from the package that
    bundles it for FastAPI (``fastapi-offline``), served here: no CDN, so the page renders where
    the daemon's users have no internet, as in most clusters."""
    from importlib.resources import files

    from fastapi.openapi.docs import get_swagger_ui_html
    from starlette.responses import HTMLResponse
    from starlette.staticfiles import StaticFiles

    assets = f"{PREFIX}/docs/assets"
    directory = str(files("fastapi_offline") / "static")
    api.mount(assets, StaticFiles(directory=directory), name="docs-assets")

    @api.get(f"{PREFIX}/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=f"{PREFIX}/openapi.json",
            title="cacheproxy: its own API",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon.png",
        )


def build_api(
    server: CacheView, *, configuration: Callable[[], Mapping[str, Any]] | None = None
) -> "FastAPI":
    """The API of ``server``; ``configuration`` gives the configuration in effect (already
    without secrets), or None when the server has none to show."""
    from fastapi import Depends, FastAPI, Path, Query, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    api = FastAPI(
        title="cacheproxy",
        version=__version__,
        summary="cacheproxy's own API: the cache, its configuration and its indexes.",
        description=DESCRIPTION,
        openapi_url=f"{PREFIX}/openapi.json",
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    _serve_docs(api)

    @api.exception_handler(ApiError)
    async def api_error(_: Request, err: ApiError) -> JSONResponse:
        return _status_response(err)

    @api.exception_handler(Exception)
    async def unexpected(_: Request, err: Exception) -> JSONResponse:
        # Answered as every server error is (the server then logs it, never the client).
        return _status_response(status.internal_error("unexpected server error"))

    @api.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException) -> JSONResponse:
        if err.status_code == 404:
            return _error(404, f"cacheproxy's API has no {request.url.path}")
        return _error(err.status_code, str(err.detail))

    @api.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in err.errors()
        )
        return _error(400, f"invalid request: {problems}")

    def served(name: str) -> ServedResource:
        for res in server.resources.values():
            if name in (res.rtype.qualified, res.rtype.config_name, res.rtype.resource):
                return res
        known = ", ".join(sorted(r.qualified for r in server.resources)) or "nothing"
        message = f'cacheproxy does not cache "{name}" (it caches: {known})'
        raise ApiError(status.status_body(code=404, reason="NotFound", message=message, details={}))

    async def listable(
        request: Request,
        resource: Annotated[
            str, Path(description="`pods`, or `plural.group` (`deployments.apps`).")
        ],
    ) -> ServedResource:
        """The served resource named in the path, if the user may list it everywhere."""
        res = served(resource)
        access = server.access
        user: UserInfo | None = request.scope.get(USER)
        if access is not None and user is not None:
            rtype = res.rtype
            attrs = ResourceAttributes(
                verb="list", group=rtype.group, version=rtype.version, resource=rtype.resource
            )
            await access.authorize(user, attrs)
        return res

    def index_of(res: ServedResource, index: str) -> str:
        if not res.store.has_index(index) or index not in res.index_paths:
            indexed = ", ".join(sorted(res.index_paths)) or "nothing"
            message = f'{res.rtype.qualified} has no index "{index}" (indexed: {indexed})'
            raise ApiError(
                status.status_body(code=404, reason="NotFound", message=message, details={})
            )
        return index

    Listable = Annotated[ServedResource, Depends(listable)]
    Index = Annotated[str, Path(description="A configured index path, e.g. `spec.nodeName`.")]

    @api.get(f"{PREFIX}/v1/status", tags=["cache"], summary="The cache's status (as /status)")
    def cache_status_doc() -> dict[str, Any]:
        return server.status_page()

    @api.get(
        f"{PREFIX}/v1/config",
        tags=["cache"],
        summary="The configuration in effect",
        description="Every setting by its name in the configuration file, and each resource; "
        "paths as written, never a token or a key's contents.",
    )
    def config_doc() -> dict[str, Any]:
        if configuration is None:
            raise status.not_found(resource="configurations", name="daemon")
        return dict(configuration())

    @api.get(f"{PREFIX}/v1/resources", tags=["indexes"], summary="The served resources")
    def resources() -> list[ResourceInfo]:
        out = []
        for res in server.resources.values():
            rtype, store = res.rtype, res.store
            out.append(
                ResourceInfo(
                    name=rtype.config_name,
                    qualified=rtype.qualified,
                    group=rtype.group,
                    version=rtype.version,
                    resource=rtype.resource,
                    kind=rtype.kind,
                    namespaced=rtype.namespaced,
                    synced=res.synced,
                    objects=len(store),
                    indexes=[
                        IndexInfo(path=i, cardinality=len(store.index_values(i)))
                        for i in store.index_names
                        if i in res.index_paths
                    ],
                )
            )
        return out

    @api.get(
        f"{PREFIX}/v1/resources/{{resource}}/indexes",
        tags=["indexes"],
        summary="A resource's indexes: cardinality and most common values",
    )
    def indexes(
        res: Listable,
        top: Annotated[int, Query(ge=0, le=1000, description="Most common values shown.")] = 10,
    ) -> ResourceIndexes:
        names = [i for i in res.store.index_names if i in res.index_paths]
        return ResourceIndexes(
            resource=res.rtype.qualified, indexes=[summarize(res, i, top=top) for i in names]
        )

    @api.get(
        f"{PREFIX}/v1/resources/{{resource}}/indexes/{{index}}/values",
        tags=["indexes"],
        summary="How many objects have each value of an index",
    )
    def values(
        res: Listable,
        index: Index,
        limit: Annotated[
            int | None, Query(ge=1, description="At most this many values (the most common).")
        ] = None,
    ) -> IndexValues:
        index = index_of(res, index)
        counts = value_counts(res, index)
        return IndexValues(
            resource=res.rtype.qualified,
            index=index,
            cardinality=len(counts),
            values=counts if limit is None else counts[:limit],
        )

    @api.get(
        f"{PREFIX}/v1/resources/{{resource}}/indexes/{{index}}/objects",
        tags=["indexes"],
        summary="Which objects have an index value",
        description="Answered from the index: the objects having any of the values, in key "
        "order. The objects themselves are on the Kubernetes path with "
        "`fieldSelector=INDEX=VALUE` (or `indexSelector=INDEX in (A,B)`).",
    )
    def objects(
        res: Listable,
        index: Index,
        value: Annotated[list[str], Query(min_length=1, description="Repeat for several.")],
        namespace: Annotated[str | None, Query(description="Only this namespace.")] = None,
    ) -> IndexObjects:
        index = index_of(res, index)
        found = objects_with(res, index, value, namespace=namespace)
        return IndexObjects(
            resource=res.rtype.qualified,
            index=index,
            values=value,
            count=len(found),
            objects=found,
        )

    return api


class LazyApi:
    """The ASGI app of :func:`build_api`, built on its first request (in a worker thread: the
    imports take a quarter of a second, during which the event loop keeps serving); requests
    arriving meanwhile wait for the same build."""

    def __init__(
        self, server: CacheView, *, configuration: Callable[[], Mapping[str, Any]] | None
    ) -> None:
        self._server = server
        self._configuration = configuration
        self._app: Callable[..., Awaitable[None]] | None = None
        self._building: asyncio.Future[Any] | None = None

    async def app(self) -> Callable[..., Awaitable[None]]:
        """The built app (building it on the first call)."""
        if self._app is None:
            if self._building is None:
                self._building = asyncio.ensure_future(
                    asyncio.to_thread(build_api, self._server, configuration=self._configuration)
                )
            try:
                built = await asyncio.shield(self._building)
            except BaseException:
                if self._building.done():
                    self._building = None  # a failed build is tried again by the next request
                raise
            self._app = built
        return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await (await self.app())(scope, receive, send)
