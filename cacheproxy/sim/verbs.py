"""Which verb a request on a resource path is, as the API server's routes decide.

The API server installs one route per (path, method) a resource supports (``endpoints/installer``):
a method a path has no route for is a 405 without details, an unknown subresource a 404. Objects
are read (GET), replaced (PUT), patched (PATCH) and deleted (DELETE) at their path; collections
are listed and watched (GET), created in (POST) and emptied (DELETE, but for namespaces);
``/status`` is read, replaced and patched; ``/binding`` only created. ``?watch=1`` makes a GET of
a collection a watch; on an object path it is ignored (a named watch is the ``/watch/`` prefix or
a ``metadata.name`` field selector), as in kube-apiserver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cacheproxy.kube import status
from cacheproxy.kube.request import ApiPath, truthy
from cacheproxy.kube.resources import ResourceType
from cacheproxy.sim import statuses
from cacheproxy.sim.strategy import subresources

__all__ = ["discovery_verbs", "resource_verb", "with_subresources"]

_OBJECT = {"GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_COLLECTION = {"GET": "list", "HEAD": "list", "POST": "create", "DELETE": "deletecollection"}
_SUBRESOURCE = {
    "status": {"GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch"},
    "binding": {"POST": "create"},
}
_NO_DELETECOLLECTION = frozenset({("", "namespaces")})


def resource_verb(
    method: str, path: ApiPath, query: Mapping[str, Sequence[str]], rtype: ResourceType
) -> str:
    """The Kubernetes verb of ``method`` on ``path`` (a path of ``rtype``)."""
    if path.subresource is not None:
        if path.name is None or path.subresource not in subresources(rtype):
            raise status.resource_not_found()
        verb = _SUBRESOURCE[path.subresource].get(method)
    elif path.watch_prefix:
        verb = "watch" if method in ("GET", "HEAD") else None
    elif path.name is not None:
        verb = _OBJECT.get(method)
    else:
        verb = _COLLECTION.get(method)
        if verb == "list" and truthy(query.get("watch")):
            verb = "watch"
        if verb == "deletecollection" and (rtype.group, rtype.resource) in _NO_DELETECOLLECTION:
            verb = None
    if verb is None:
        raise statuses.method_not_supported()
    return verb


def discovery_verbs(rtype: ResourceType) -> list[str]:
    """The verbs discovery lists for ``rtype`` (sorted, as the API server lists them)."""
    verbs = {"create", "delete", "get", "list", "patch", "update", "watch", "deletecollection"}
    if (rtype.group, rtype.resource) in _NO_DELETECOLLECTION:
        verbs.discard("deletecollection")
    return sorted(verbs)


def _subresource_kind(rtype: ResourceType, subresource: str) -> str:
    return "Binding" if subresource == "binding" else rtype.kind


def _subresource_verbs(subresource: str) -> list[str]:
    return sorted(set(_SUBRESOURCE[subresource].values()))


def with_subresources(doc: dict[str, Any], types: Sequence[ResourceType]) -> dict[str, Any]:
    """A discovery document (``APIResourceList`` or ``APIGroupDiscoveryList``) with the
    subresources the simulator serves, as the API server lists them."""
    by_name = {(t.group, t.resource): t for t in types}
    if doc.get("kind") == "APIResourceList":
        group = doc["groupVersion"].rpartition("/")[0]
        out = []
        for entry in doc["resources"]:
            out.append(entry)
            rtype = by_name.get((group, entry["name"]))
            if rtype is None:
                continue
            for sub in subresources(rtype):
                out.append(
                    {
                        "name": f"{entry['name']}/{sub}",
                        "singularName": "",
                        "namespaced": entry["namespaced"],
                        "kind": _subresource_kind(rtype, sub),
                        "verbs": _subresource_verbs(sub),
                    }
                )
        doc["resources"] = out
        return doc
    for item in doc.get("items", []):
        group = item["metadata"].get("name", "")
        for version in item["versions"]:
            for entry in version["resources"]:
                rtype = by_name.get((group, entry["resource"]))
                subs = subresources(rtype) if rtype is not None else ()
                if rtype is not None and subs:
                    entry["subresources"] = [
                        {
                            "subresource": sub,
                            "responseKind": {
                                "group": "",
                                "version": "",
                                "kind": _subresource_kind(rtype, sub),
                            },
                            "verbs": _subresource_verbs(sub),
                        }
                        for sub in subs
                    ]
    return doc
