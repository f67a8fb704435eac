"""Who is asking and what they ask: the request attributes authentication and authorization
work on, shared by the simulator (which decides) and the daemon (which asks upstream).

:class:`UserInfo` and the well-known user and group names mirror
``k8s.io/apiserver/pkg/authentication/user``; :class:`ResourceAttributes` and
:class:`NonResourceAttributes` mirror the API server's ``RequestInfo`` as ``authorizer.Attributes``
presents it. Also the pieces of the API server's authenticators both need: the bearer token of an
``Authorization`` header, ``system:authenticated``,
and the 403 body of a denied request.
"""

from __future__ import annotations

from dataclasses import dataclass

from cacheproxy.errors import ApiError
from cacheproxy.kube import status

__all__ = [
    "ANONYMOUS",
    "ANONYMOUS_USER",
    "AUTHENTICATED",
    "MASTERS",
    "UNAUTHENTICATED",
    "Attributes",
    "NonResourceAttributes",
    "ResourceAttributes",
    "UserInfo",
    "bearer_token",
    "forbidden",
    "with_authenticated",
]

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
MASTERS = "system:masters"


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


ANONYMOUS_USER = UserInfo(ANONYMOUS, (UNAUTHENTICATED,))


@dataclass(frozen=True, slots=True)
class ResourceAttributes:
    """What a resource request does, as the API server's RequestInfo describes it.

    ``namespace`` is empty for cluster-scoped requests and for lists across all namespaces; for
    ``namespaces/<name>`` requests it is ``<name>`` (so a namespace-limited rule may read its own
    namespace). ``name`` is empty for list, watch and create.
    """

    verb: str
    group: str
    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    version: str = ""

    def to_review(self) -> dict[str, str]:
        """``spec.resourceAttributes`` JSON: Go field order, empty fields omitted."""
        pairs = (
            ("namespace", self.namespace),
            ("verb", self.verb),
            ("group", self.group),
            ("version", self.version),
            ("resource", self.resource),
            ("subresource", self.subresource),
            ("name", self.name),
        )
        return {k: v for k, v in pairs if v}


@dataclass(frozen=True, slots=True)
class NonResourceAttributes:
    """A request for a path that is not a resource (``/version``, ``/api``, ``/healthz``)."""

    verb: str
    path: str

    def to_review(self) -> dict[str, str]:
        return {k: v for k, v in (("path", self.path), ("verb", self.verb)) if v}


Attributes = ResourceAttributes | NonResourceAttributes


def bearer_token(authorization_header: str | None) -> str | None:
    """The token of ``Authorization: Bearer <token>``, or None if the header carries none.

    As the API server's bearer-token authenticator: the scheme is case-insensitive, anything
    other than Bearer (or an empty token) is "no token" (so anonymous), not an error.
    """
    parts = (authorization_header or "").strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def with_authenticated(user: UserInfo) -> UserInfo:
    """``AuthenticatedGroupAdder``: every authenticated user is in ``system:authenticated``."""
    if AUTHENTICATED in user.groups or UNAUTHENTICATED in user.groups:
        return user
    return UserInfo(user.name, (*user.groups, AUTHENTICATED), user.uid)


def forbidden(user: UserInfo, attrs: Attributes) -> ApiError:
    """``responsewriters.Forbidden`` + ``NewForbidden``: the 403 body for a denied request."""
    if isinstance(attrs, NonResourceAttributes):
        message = f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
        return ApiError(
            status.status_body(code=403, reason="Forbidden", message=message, details={})
        )
    error = status.forbidden(
        user=user.name,
        verb=attrs.verb,
        resource=attrs.resource,
        group=attrs.group,
        namespace=attrs.namespace,
        name=attrs.name,
    )
    if not attrs.subresource:
        return error
    # The message names "pods/log"; the subject and details.kind stay "pods".
    needle = f'cannot {attrs.verb} resource "{attrs.resource}"'
    full = f'cannot {attrs.verb} resource "{attrs.resource}/{attrs.subresource}"'
    body = error.status.copy()
    body["message"] = body["message"].replace(needle, full, 1)
    return ApiError(body)
