"""What a read-only cache cannot serve, answered as a ``metav1.Status`` that says so and where to
send the request instead (the upstream API server, by its URL when the daemon knows it).

The API server answers these requests; the cache holds objects and nothing else, so:

- **writes** — any method but GET and HEAD, on any path (a resource served or not, a
  ``SelfSubjectAccessReview`` of ``kubectl auth can-i``, a ``/status`` subresource): 405
  ``MethodNotAllowed``, as the API server answers a verb a resource does not support;
- **subresources the API server streams from a node or proxies** (``log``, ``exec``,
  ``attach``, ``portforward``, ``proxy``, and the old ``/api/v1/proxy/…`` paths): 501
  ``NotImplemented`` — whatever the method, there is nothing in the cache to answer with;
- **connection upgrades** (websocket, SPDY: ``kubectl exec``/``attach``/``port-forward``, and
  websocket watches): 501 as well; a watch is served as an HTTP stream (``?watch=true``). Other
  upgrade offers (``h2c``) are ignored, as HTTP/1.1 lets a server ignore them;
- **paths that are not the Kubernetes API** and not the daemon's own: 404 naming what is served
  (``/``'s page is :mod:`.homepage`'s);
- **resources it does not cache**: 404 naming what it caches and how to serve the one asked for.

Nothing here is logged: each is an ordinary answer to a client, counted in the request metrics.
The check costs a read of the method on the hot paths (:func:`refusal` returns None at once for
a GET or HEAD without a subresource or an ``Upgrade``).
"""

from __future__ import annotations

from collections.abc import Sequence

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.request import ApiPath
from cacheproxy.serving import Request

__all__ = ["CONNECT_SUBRESOURCES", "not_cached", "not_served_here", "refusal", "websocket_refusal"]

CONNECT_SUBRESOURCES = frozenset({"log", "exec", "attach", "portforward", "proxy"})
"""Subresources the API server streams from a kubelet or proxies to a pod, service or node."""

_READS = ("GET", "HEAD")
_UPGRADES = ("websocket", "spdy")
"""``Upgrade`` tokens refused (by prefix: ``SPDY/3.1``); ``h2c`` and others are ignored."""

_WHAT = "cacheproxy is a read-only cache of the Kubernetes API"


def _instead(api_server: str) -> str:
    where = f"the API server at {api_server}" if api_server else "the API server directly"
    return f"Send this request to {where}."


def _target(path: ApiPath | None, fallback: str) -> tuple[str, str]:
    """(what the request names, in words; its group) — ``pods/exec`` or a path."""
    if path is None or path.resource is None:
        return fallback, ""
    name = path.resource
    if path.subresource:
        name = f"{name}/{path.subresource.split('/', 1)[0]}"
    group = path.group_version.group
    return (f"{name}.{group}" if group else name), group


def refusal(
    req: Request, path: ApiPath | None, verb: str | None, *, api_server: str
) -> ApiError | None:
    """The Status refusing ``req`` (``path``: its parsed API path; ``verb``: its Kubernetes verb
    there), or None when it is a read the cache may serve."""
    subresource = path.subresource if path is not None else None
    upgrade = req.header("upgrade")
    reading = req.method in _READS
    if (
        reading
        and subresource is None
        and not upgrade
        and (path is None or path.resource != "proxy")
    ):
        return None  # the hot path: one read of each
    what, group = _target(path, req.path)
    connect = (subresource or "").split("/", 1)[0]
    if connect in CONNECT_SUBRESOURCES or (path is not None and path.resource == "proxy"):
        return _not_implemented(
            f"{_WHAT}: it holds objects, not the {what} the API server streams from a node or "
            f"proxies. {_instead(api_server)}",
            kind=what,
            group=group,
        )
    protocol = upgrade.lower()
    if protocol.startswith(_UPGRADES):
        return upgrade_refused(protocol.split("/", 1)[0], what, group=group, api_server=api_server)
    if reading:
        return None  # another subresource, or an upgrade HTTP/1.1 lets a server ignore
    method = req.method
    return ApiError(
        status.status_body(
            code=405,
            reason="MethodNotAllowed",
            message=f"{_WHAT}: it does not {verb or method.lower()} {what} ({method}). "
            f"{_instead(api_server)}",
            details={"group": group, "kind": what} if group else {"kind": what},
        )
    )


def upgrade_refused(protocol: str, what: str, *, group: str = "", api_server: str) -> ApiError:
    """501 for a connection upgrade (``protocol``: websocket, spdy) of a request for ``what``."""
    return _not_implemented(
        f"{_WHAT}: it does not upgrade connections ({protocol}) for {what}; it serves watches "
        f"as HTTP streams (?watch=true). {_instead(api_server)}",
        kind=what,
        group=group,
    )


def websocket_refusal(req: Request, path: ApiPath | None, *, api_server: str) -> ApiError:
    """The Status refusing a websocket request (the ASGI ``websocket`` scope) for ``path``."""
    what, group = _target(path, req.path)
    subresource = (path.subresource or "").split("/", 1)[0] if path is not None else ""
    if subresource in CONNECT_SUBRESOURCES:
        return _not_implemented(
            f"{_WHAT}: it holds objects, not the {what} the API server streams from a node or "
            f"proxies. {_instead(api_server)}",
            kind=what,
            group=group,
        )
    return upgrade_refused("websocket", what, group=group, api_server=api_server)


def not_served_here(path: str) -> ApiError:
    """404 for a path outside the Kubernetes API and the daemon's own paths, naming those."""
    return ApiError(
        status.status_body(
            code=404,
            reason="NotFound",
            message=f"{_WHAT} and serves nothing at {path}: it serves the API paths of the "
            "resources it caches (/api, /apis; read-only), /version, /openapi/v2, /openapi/v3, "
            "/healthz, /livez, /readyz, /metrics, /status, and its own API under /cacheproxy/ "
            "(described at /cacheproxy/docs); a browser finds a page about the cache at /",
            details={},
        )
    )


def not_cached(path: ApiPath, cached: Sequence[str], *, api_server: str) -> ApiError:
    """404 for a resource the daemon does not cache (pass-through off): what it caches, and the
    two ways to have this one answered (cache it, or pass it through)."""
    gv = path.group_version
    resource = path.resource or ""
    name = f"{resource}.{gv.group}" if gv.group else resource
    entry = f"{gv.group}/{gv.version}/{resource}" if gv.group else resource
    shown = ", ".join(cached[:_NAMED]) + (
        f" and {len(cached) - _NAMED} more" if len(cached) > _NAMED else ""
    )
    where = f"the API server at {api_server}" if api_server else "the API server"
    return ApiError(
        status.status_body(
            code=404,
            reason="NotFound",
            message=f"the server could not find the requested resource: cacheproxy does not "
            f"cache {name} (it caches {shown or 'nothing'}) and passes nothing through. To "
            f'serve it, add "- resource: {entry}" under resources: in its configuration; or '
            f"set passthrough.enabled: true to send what it does not cache to {where}.",
            details={"group": gv.group, "kind": resource} if gv.group else {"kind": resource},
        )
    )


_NAMED = 10
"""Cached resources a :func:`not_cached` message names at most."""


def _not_implemented(message: str, *, kind: str, group: str) -> ApiError:
    return ApiError(
        status.status_body(
            code=501,
            reason="NotImplemented",
            message=message,
            details={"group": group, "kind": kind} if group else {"kind": kind},
        )
    )
