"""Who is asking, and may they: authentication and authorization of the daemon's clients.

A client reads through the proxy exactly what RBAC lets it read directly (docs/design.md §7). The daemon
does not hold RBAC itself; it asks the upstream API server, as a webhook authorizer would:

- **who**: a client certificate verified against the client CA (CommonName = user,
  Organizations = groups, as the API server's x509 authenticator), else a bearer token — looked up
  in a static token file or checked with a ``TokenReview`` upstream — else anonymous if allowed
  (401 otherwise). Every authenticated user is in ``system:authenticated``.
- **may they**: a ``SubjectAccessReview`` upstream per distinct (user, groups, verb, group,
  resource, namespace, name) — or (user, groups, verb, path) for paths that are no resource.
  Denied → the API server's 403 body (``User "x" cannot list resource "pods" …``).

Answers are cached (bounded LRU with a time to live per outcome: by default a token 2 min, an
allowed decision 5 min and a denied one 30 s, the API server's webhook defaults), and concurrent
requests for the same uncached answer wait for one review (single flight). Tokens are cached by
their SHA-256 digest and never logged. If the upstream cannot answer a review, the request gets a
503 with ``Retry-After`` (nothing is cached), while cached answers keep working.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from cachetools import TLRUCache

from cacheproxy.errors import ApiError, CacheProxyError
from cacheproxy.kube import status
from cacheproxy.kube.attributes import (
    ANONYMOUS_USER,
    Attributes,
    NonResourceAttributes,
    ResourceAttributes,
    UserInfo,
    bearer_token,
    forbidden,
    with_authenticated,
)
from cacheproxy.kube.request import ApiPath

__all__ = [
    "AccessControl",
    "AccessMetrics",
    "AccessReviewer",
    "AccessSettings",
    "TokenAuthenticator",
    "request_attributes",
]

T = TypeVar("T")
V = TypeVar("V")


class TokenAuthenticator(Protocol):
    """Who a bearer token belongs to (None: nobody; raise for "cannot tell now")."""

    async def review_token(self, token: str) -> UserInfo | None: ...


class AccessReviewer(Protocol):
    """Whether ``user`` may do ``attrs`` (raise for "cannot tell now")."""

    async def review_access(self, user: UserInfo, attrs: Attributes) -> bool: ...


class AccessMetrics(Protocol):
    def auth_cache(self, cache: str, *, hit: bool) -> None: ...

    def auth_review(self, kind: str, seconds: float) -> None: ...


class _NoMetrics:
    def auth_cache(self, cache: str, *, hit: bool) -> None:
        pass

    def auth_review(self, kind: str, seconds: float) -> None:
        pass


@dataclass(frozen=True, slots=True)
class AccessSettings:
    token_ttl: float = 120.0
    """Seconds a TokenReview answer is reused (an unauthenticated one at most 10 s)."""
    allowed_ttl: float = 300.0
    denied_ttl: float = 30.0
    cache_size: int = 10_000
    """Entries per cache (tokens, decisions); the least recently used go first."""
    allow_anonymous: bool = False
    """Requests without credentials as ``system:anonymous`` (authorized like anyone) instead
    of 401."""
    namespace_filtering: bool = False
    """A cluster-wide list/watch the user may not make returns the namespaces they may read
    (an extension; see ``CacheServer._readable_namespaces``)."""
    cache_tokens: bool = True
    """Cache token answers (for TokenReview; a local token file is asked directly, so a
    rotation applies at once)."""


class _ReviewCache(Generic[V]):
    """A bounded TTL cache whose misses are filled by one review at a time per key."""

    def __init__(
        self,
        name: str,
        *,
        size: int,
        ttl: Callable[[V], float],
        metrics: AccessMetrics,
        clock: Callable[[], float],
    ) -> None:
        self.name = name
        self._cache: TLRUCache[Hashable, V] = TLRUCache(
            maxsize=size, ttu=lambda _key, value, now: now + ttl(value), timer=clock
        )
        self._pending: dict[Hashable, asyncio.Future[V]] = {}
        self._metrics = metrics
        self.hits = self.misses = 0

    async def get(self, key: Hashable, review: Callable[[], Awaitable[V]]) -> V:
        try:
            value = self._cache[key]
        except KeyError:
            pass
        else:
            self.hits += 1
            self._metrics.auth_cache(self.name, hit=True)
            return value
        pending = self._pending.get(key)
        if pending is not None:
            self.hits += 1
            self._metrics.auth_cache(self.name, hit=True)
            return await asyncio.shield(pending)
        self.misses += 1
        self._metrics.auth_cache(self.name, hit=False)
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            result = await review()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody else must
            raise
        else:
            self._cache[key] = result
            future.set_result(result)
            return result
        finally:
            del self._pending[key]


class AccessControl:
    """Authenticates and authorizes each request; see the module docstring."""

    def __init__(
        self,
        *,
        tokens: TokenAuthenticator | None,
        reviewer: AccessReviewer,
        settings: AccessSettings | None = None,
        metrics: AccessMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings = settings or AccessSettings()
        self._tokens = tokens
        self._reviewer = reviewer
        self._metrics = metrics or _NoMetrics()
        self.token_cache: _ReviewCache[UserInfo | None] = _ReviewCache(
            "token",
            size=settings.cache_size,
            ttl=lambda user: (
                settings.token_ttl if user is not None else min(10.0, settings.token_ttl)
            ),
            metrics=self._metrics,
            clock=clock,
        )
        self.decision_cache: _ReviewCache[bool] = _ReviewCache(
            "access",
            size=settings.cache_size,
            ttl=lambda allowed: settings.allowed_ttl if allowed else settings.denied_ttl,
            metrics=self._metrics,
            clock=clock,
        )

    async def authenticate(
        self, authorization: str | None, peer_user: tuple[str, tuple[str, ...]] | None
    ) -> UserInfo:
        """The request's user, or the API server's 401."""
        if peer_user is not None and peer_user[0]:
            return with_authenticated(UserInfo(peer_user[0], tuple(peer_user[1])))
        token = bearer_token(authorization)
        if token is None or self._tokens is None:
            if self.settings.allow_anonymous:
                return ANONYMOUS_USER
            raise status.unauthorized()
        tokens = self._tokens
        if self.settings.cache_tokens:
            digest = hashlib.sha256(token.encode()).digest()
            user = await self.token_cache.get(
                digest, lambda: self._review("token", tokens.review_token(token))
            )
        else:
            user = await self._review("token", tokens.review_token(token))
        if user is None:
            raise status.unauthorized()
        return with_authenticated(user)

    async def authorize(self, user: UserInfo, attrs: Attributes) -> None:
        """Nothing if allowed, else the API server's 403."""
        key = (user.name, user.groups, attrs)
        reviewer = self._reviewer
        allowed = await self.decision_cache.get(
            key, lambda: self._review("access", reviewer.review_access(user, attrs))
        )
        if not allowed:
            raise forbidden(user, attrs)

    async def allows(self, user: UserInfo, attrs: Attributes) -> bool:
        try:
            await self.authorize(user, attrs)
        except ApiError as err:
            if err.code == 403:
                return False
            raise
        return True

    async def _review(self, kind: str, review: Awaitable[T]) -> T:
        began = time.perf_counter()
        try:
            return await review
        except ApiError as err:
            raise status.service_unavailable(
                f"cannot check the request's {'credentials' if kind == 'token' else 'access'} "
                f"with the upstream API server: {err.message}"
            ) from err
        except CacheProxyError as err:
            raise status.service_unavailable(
                f"cannot check the request's {'credentials' if kind == 'token' else 'access'} "
                f"with the upstream API server: {err}"
            ) from err
        finally:
            self._metrics.auth_review(kind, time.perf_counter() - began)


def request_attributes(
    method: str, path: str, api_path: ApiPath | None, verb: str | None
) -> Attributes:
    """The attributes the API server's ``RequestInfoResolver`` gives a request.

    A resource request (``/api/v1/namespaces/ns/pods/x``) names verb, group, version, resource,
    namespace and name — for ``namespaces/<name>`` the namespace is the name itself; anything
    else (discovery, ``/version``, ``/metrics``) is a path with the lower-cased HTTP method.
    """
    if api_path is None or api_path.resource is None or verb is None:
        return NonResourceAttributes(verb=method.lower(), path=path)
    namespace = api_path.namespace or ""
    name = api_path.name or ""
    gv = api_path.group_version
    if gv.group == "" and api_path.resource == "namespaces" and name:
        namespace = name
    return ResourceAttributes(
        verb=verb,
        group=gv.group,
        version=gv.version,
        resource=api_path.resource,
        namespace=namespace,
        name=name,
        subresource=api_path.subresource or "",
    )
