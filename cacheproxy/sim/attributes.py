"""Who is asking and what they ask: the request attributes the simulator's auth works on.

:class:`UserInfo` and the well-known user and group names mirror
``k8s.io/apiserver/pkg/authentication/user``; :class:`ResourceAttributes` and
:class:`NonResourceAttributes` mirror the API server's ``RequestInfo`` as ``authorizer.Attributes``
presents it. The policy (:mod:`~cacheproxy.sim.policy`) matches them, :mod:`~cacheproxy.sim.auth`
establishes and decides on them, and the review endpoints (:mod:`~cacheproxy.sim.reviews`) read
them from request bodies.
"""

from __future__ import annotations

from dataclasses import dataclass

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
