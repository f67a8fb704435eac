"""Discovery documents: legacy (``APIVersions``, ``APIGroupList``, ``APIResourceList``) and
aggregated (``APIGroupDiscoveryList`` v2 and v2beta1), built from resource types.

Aggregated discovery is negotiated on ``Accept`` as client-go asks for it
(``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json``); the
reply's ``Content-Type`` tells the client which document it got (``discovery_client.go``).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from cacheproxy.kube.resources import GroupVersion, ResourceType

__all__ = [
    "AGGREGATED_VERSIONS",
    "aggregated_content_type",
    "aggregated_discovery",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "api_versions",
    "negotiate_aggregated",
    "storage_version_hash",
]

AGGREGATED_VERSIONS = ("v2", "v2beta1")

VerbsFor = Callable[[ResourceType], Sequence[str]]


def aggregated_content_type(version: str) -> str:
    return f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"


def negotiate_aggregated(accept: str, served: Sequence[str] = AGGREGATED_VERSIONS) -> str | None:
    """The aggregated discovery version if the first acceptable clause of ``accept`` asks for
    one of ``served`` (:attr:`KubeVersion.aggregated_discovery_versions`); None when a plain JSON
    clause comes first (legacy discovery)."""
    for clause in accept.split(","):
        params = [p.strip() for p in clause.split(";")]
        if params[0] not in ("application/json", "application/*", "*/*"):
            continue
        kv = dict(p.split("=", 1) for p in params[1:] if "=" in p)
        if not kv.keys() & {"g", "v", "as"}:
            return None  # plain JSON accepted first
        if (
            kv.get("g") == "apidiscovery.k8s.io"
            and kv.get("as") == "APIGroupDiscoveryList"
            and kv.get("v") in served
        ):
            return kv["v"]
    return None


def api_versions(server_address: str) -> dict[str, Any]:
    """``GET /api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_group(group: str, versions: Sequence[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(gvs: Sequence[GroupVersion]) -> dict[str, Any]:
    """``GET /apis``: every non-core group with its versions (first = preferred)."""
    by_group: dict[str, list[str]] = {}
    for gv in gvs:
        if gv.group:
            by_group.setdefault(gv.group, []).append(gv.version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [api_group(g, vs) for g, vs in by_group.items()],
    }


def storage_version_hash(rtype: ResourceType) -> str:
    """``discovery.StorageVersionHash``: base64 of the first 8 bytes of SHA-256 of
    ``group/version/Kind`` (its storage version; the served one for the built-ins we know)."""
    digest = hashlib.sha256(f"{rtype.group}/{rtype.version}/{rtype.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode("ascii")


def api_resource_list(
    gv: GroupVersion, types: Sequence[ResourceType], verbs_for: VerbsFor
) -> dict[str, Any]:
    """``GET /api/v1`` or ``/apis/{g}/{v}``."""
    resources = []
    for t in sorted(types, key=lambda t: t.resource):
        entry: dict[str, Any] = {
            "name": t.resource,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": list(verbs_for(t)),
        }
        if t.short_names:
            entry["shortNames"] = list(t.short_names)
        if t.categories:
            entry["categories"] = list(t.categories)
        if "watch" in entry["verbs"]:  # kept in storage (not a review or a virtual resource)
            entry["storageVersionHash"] = t.storage_version_hash or storage_version_hash(t)
        resources.append(entry)
    doc: dict[str, Any] = {"kind": "APIResourceList"}
    if gv.group:
        doc["apiVersion"] = "v1"
    doc["groupVersion"] = gv.api_version
    doc["resources"] = resources
    return doc


def aggregated_discovery(
    gvs: Sequence[GroupVersion],
    types_in: Callable[[GroupVersion], Sequence[ResourceType]],
    verbs_for: VerbsFor,
    *,
    version: str,
) -> dict[str, Any]:
    """``APIGroupDiscoveryList`` for ``/api`` (pass only the core group version) or ``/apis``."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for gv in gvs:
        resources = []
        for t in sorted(types_in(gv), key=lambda t: t.resource):
            # Built-in kinds leave the group and version to the document's; a custom resource
            # names its own, as kube-apiserver's aggregated discovery of CRDs does.
            kind_group, kind_version = ("", "") if t.builtin else (t.group, t.version)
            entry: dict[str, Any] = {
                "resource": t.resource,
                "responseKind": {"group": kind_group, "version": kind_version, "kind": t.kind},
                "scope": t.scope,
                "singularResource": t.singular,
                "verbs": list(verbs_for(t)),
            }
            if t.short_names:
                entry["shortNames"] = list(t.short_names)
            if t.categories:
                entry["categories"] = list(t.categories)
            resources.append(entry)
        groups.setdefault(gv.group, []).append(
            {"version": gv.version, "resources": resources, "freshness": "Current"}
        )
    items = []
    for group, versions in groups.items():
        metadata: dict[str, Any] = {"name": group} if group else {}
        metadata["creationTimestamp"] = None
        items.append({"metadata": metadata, "versions": versions})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": items,
    }
