"""Kubernetes API request paths and headers, parsed (pure functions shared by servers).

``/api/v1/namespaces/ns/pods/name`` → :class:`ApiPath`; the deprecated ``/watch/`` prefix; what a
request's verb is; whether the client accepts JSON; whether to pretty-print (as the API server
does for ``?pretty=true`` and for curl, Wget and browsers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from cacheproxy.kube import status
from cacheproxy.kube.protobuf import accepts_only_protobuf
from cacheproxy.kube.resources import GroupVersion

__all__ = [
    "REPRESENTATIONS",
    "ApiPath",
    "check_accepts_json",
    "parse_api_path",
    "truthy",
    "verb_of",
    "wants_pretty",
]

REPRESENTATIONS = ("application/json", "application/json;stream=watch")
"""What cacheproxy serves (Tables and metadata-only forms are JSON too), as a 406 names them."""


@dataclass(frozen=True, slots=True)
class ApiPath:
    """A request under ``/api/{v}`` or ``/apis/{g}/{v}``. ``resource`` is None for the group
    version's resource list; ``namespace`` is set for ``…/namespaces/{ns}/{resource}…``."""

    group_version: GroupVersion
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    watch_prefix: bool = False


def split_path(path: str) -> list[str]:
    return [unquote(p) for p in path.strip("/").split("/") if p]


def parse_api_path(parts: Sequence[str]) -> ApiPath | None:
    """None when ``parts`` is not a resource path (``/api``, ``/apis``, ``/apis/{g}``, …)."""
    if parts[:1] == ["api"] and len(parts) >= 2:
        gv, rest = GroupVersion("", parts[1]), list(parts[2:])
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        gv, rest = GroupVersion(parts[1], parts[2]), list(parts[3:])
    else:
        return None
    watch_prefix = bool(rest) and rest[0] == "watch"
    if watch_prefix:
        rest = rest[1:]
    if not rest:
        return ApiPath(gv, watch_prefix=watch_prefix)
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    return ApiPath(
        gv,
        resource=rest[0],
        namespace=namespace,
        name=rest[1] if len(rest) >= 2 else None,
        subresource="/".join(rest[2:]) or None,
        watch_prefix=watch_prefix,
    )


def truthy(values: Sequence[str] | None) -> bool:
    """A boolean query parameter as apimachinery converts it (only "false"/"0" are false)."""
    return bool(values) and values is not None and values[0].lower() not in ("false", "0")


def verb_of(method: str, path: ApiPath, query: Mapping[str, Sequence[str]]) -> str:
    """The Kubernetes verb of a request (``""`` for a method the API has no verb for)."""
    if method in ("GET", "HEAD"):
        # ``?watch=1`` makes a watch of a collection only; on an object path the API server
        # answers a plain GET (a watch of one object is ``/watch/…/NAME`` or a name selector).
        if path.watch_prefix or (not path.name and truthy(query.get("watch"))):
            return "watch"
        return "get" if path.name else "list"
    return {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if path.name else "deletecollection",
    }.get(method, "")


def check_accepts_json(accept: str, representations: Sequence[str] = REPRESENTATIONS) -> None:
    """406 unless the client accepts JSON (Table and protobuf askers list JSON as a fallback):
    naming ``representations``, or to a client that accepts only protobuf, the API server's
    answer for an object it cannot encode so."""
    if not accept:
        return
    for clause in accept.split(","):
        media = clause.split(";")[0].strip().lower()
        if media in ("application/json", "application/*", "*/*", "application/json-seq"):
            return
    if accepts_only_protobuf(accept):
        raise status.not_encodable()
    raise status.not_acceptable(representations)


def wants_pretty(query: Mapping[str, Sequence[str]], user_agent: str) -> bool:
    pretty = query.get("pretty")
    if pretty is not None:
        return truthy(pretty)
    return user_agent.startswith(("curl", "Wget", "Mozilla/5.0"))
