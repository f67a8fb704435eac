"""Whether a request is served: its size, who sent it and what they may read, and how many are
served at once (docs/design.md §7: every buffer bounded, overload refused early with ``Retry-After``).

In the order a request meets them:

- **bounds** — URL (414) and header (431) sizes, and no body on a read (400);
- **access** — authentication and authorization through :class:`~.access.AccessControl` (None:
  open), with the namespace-filtered mode (an extension, off by default): a cluster-wide list or
  watch the user may not make is narrowed to the namespaces they may read;
- **limits** — requests in flight (watches and monitoring excepted: they have their own bounds),
  and open watches per resource and per user; each refusal is a 429 counted by cause.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.attributes import Attributes, ResourceAttributes, UserInfo
from cacheproxy.kube.request import ApiPath
from cacheproxy.server.access import AccessControl, request_attributes
from cacheproxy.server.metrics import ServerMetrics
from cacheproxy.server.options import ServerOptions
from cacheproxy.serving import Receive, Request, Scope

__all__ = ["REJECTIONS", "Admission", "ServedRequest"]

REJECTIONS = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    414: "url_too_long",
    431: "headers_too_large",
}
"""Refusals counted in ``cacheproxy_http_rejected_total{reason}`` (429s where raised, by cause)."""


class ServedRequest(Request):
    """A request as the server's handlers see it: who sent it, and its metrics' labels."""

    __slots__ = ("namespaces", "resource", "user", "verb")

    def __init__(self, scope: Scope, receive: Receive) -> None:
        super().__init__(scope, receive)
        self.user: UserInfo | None = None
        self.namespaces: frozenset[str] | None = None
        """Only these namespaces may be read (the namespace-filtered mode); None: no narrowing."""
        # The metrics' labels: set once the request is known to be on a served resource.
        self.verb = "get" if self.method in ("GET", "HEAD") else "other"
        self.resource = ""


class Admission:
    """The server's bounds, access control and limits; one per server."""

    def __init__(
        self, options: ServerOptions, metrics: ServerMetrics, access: AccessControl | None
    ) -> None:
        self.options = options
        self.metrics = metrics
        self.access = access
        """Authentication and authorization of every request but health checks (None: open)."""
        self.in_flight = 0
        self.watchers_by_user: Counter[str] = Counter()

    def check_bounds(self, req: ServedRequest) -> None:
        """Bounds on what a request may bring: URL and header sizes, and no body on a read (the
        only requests served)."""
        scope = req.scope
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

    async def authenticate(self, req: ServedRequest) -> None:
        """Who sent ``req`` (``req.user``), or the API server's 401 (nothing without access
        control). Enough for a request refused whoever asks: a write to the read-only cache."""
        access = self.access
        if access is not None:
            req.user = await access.authenticate(req.header("authorization") or None, req.peer_user)

    async def authorize(
        self,
        req: ServedRequest,
        path: ApiPath | None,
        verb: str | None,
        *,
        served_namespaces: Callable[[ApiPath], list[str] | None],
    ) -> None:
        """Authenticate and authorize ``req`` (nothing without access control).
        ``served_namespaces`` gives the namespaces holding objects of a path's resource (None
        when it is not a served namespaced resource), for the namespace-filtered mode."""
        access = self.access
        if access is None:
            return
        await self.authenticate(req)
        assert req.user is not None
        attrs = request_attributes(req.method, req.path, path, verb)
        try:
            await access.authorize(req.user, attrs)
        except ApiError as denied:
            req.namespaces = await self._readable_namespaces(
                req.user, attrs, path, served_namespaces
            )
            if req.namespaces is None:
                raise denied from None

    async def _readable_namespaces(
        self,
        user: UserInfo,
        attrs: Attributes,
        path: ApiPath | None,
        served_namespaces: Callable[[ApiPath], list[str] | None],
    ) -> frozenset[str] | None:
        """The namespace-filtered mode: a cluster-wide list or watch the user may not make is
        narrowed to the namespaces they may read — those that hold objects now; None if the
        mode is off, it does not apply, or no namespace is."""
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
        candidates = served_namespaces(path)
        if candidates is None:
            return None
        allowed = [
            ns
            for ns in candidates
            if await access.allows(user, dataclasses.replace(attrs, namespace=ns))
        ]
        return frozenset(allowed) if allowed else None

    def admit(self) -> None:
        """Count a request in flight, or refuse it (429) when too many are; pair with
        :meth:`release`."""
        if self.in_flight >= self.options.max_in_flight:
            self.metrics.rejected("in_flight")
            raise status.too_many_requests("Too many requests, please try again later.")
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight -= 1

    def admit_watch(self, req: ServedRequest, watchers: int) -> str:
        """Count a watch for its user, or refuse it (429) when its resource has too many
        (``watchers`` open now) or its user does; the user to :meth:`release_watch`."""
        if watchers >= self.options.max_watchers:
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
        return user

    def release_watch(self, user: str) -> None:
        self.watchers_by_user[user] -= 1
        if self.watchers_by_user[user] <= 0:
            del self.watchers_by_user[user]

    def count_rejection(self, err: ApiError) -> None:
        """A refusal answered with ``err``, counted when it is one of :data:`REJECTIONS`."""
        reason = REJECTIONS.get(err.code)
        if reason is not None:
            self.metrics.rejected(reason)
