"""What cluster administrators manage (policy, coordination, storage, RBAC): resource quotas,
pod disruption budgets, leases, storage classes, CSI nodes and drivers (``printers.go``; limit
ranges and cluster roles print the default Name and Created At)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cacheproxy.kube.printers.cells import NONE, Obj, age, as_list, dig, metadata, name_of

_DEFAULT_CLASS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def print_resourcequota(quota: Obj, now: datetime) -> list[Any]:
    """``printResourceQuota``: ``name: used/hard`` of each resource in ``status.hard``, sorted by
    name; ``limits.*`` in the Limit column, the others in Request."""
    hard = dig(quota, "status", "hard")
    used = dig(quota, "status", "used")
    hard = hard if isinstance(hard, Mapping) else {}
    used = used if isinstance(used, Mapping) else {}
    requests: list[str] = []
    limits: list[str] = []
    for resource in sorted(hard):
        column = limits if resource.split(".")[0] == "limits" and "." in resource else requests
        column.append(f"{resource}: {used.get(resource, '0')}/{hard[resource]}")
    return [name_of(quota), age(quota, now), ", ".join(requests), ", ".join(limits)]


def _int_or_string(value: Any) -> str:
    """``intstr.IntOrString.String()``, ``N/A`` when unset."""
    return "N/A" if value is None else str(value)


def print_poddisruptionbudget(pdb: Obj, now: datetime) -> list[Any]:
    spec = pdb.get("spec") or {}
    allowed = dig(pdb, "status", "disruptionsAllowed")
    return [
        name_of(pdb),
        _int_or_string(spec.get("minAvailable")),
        _int_or_string(spec.get("maxUnavailable")),
        allowed if isinstance(allowed, int) else 0,
        age(pdb, now),
    ]


def print_lease(lease: Obj, now: datetime) -> list[Any]:
    return [name_of(lease), str(dig(lease, "spec", "holderIdentity") or ""), age(lease, now)]


def print_storageclass(sc: Obj, now: datetime) -> list[Any]:
    """``printStorageClass``: `` (default)`` after the default class's name; the API server's
    defaults for what is unset."""
    annotations = metadata(sc).get("annotations") or {}
    default = any(annotations.get(key) == "true" for key in _DEFAULT_CLASS)
    return [
        name_of(sc) + (" (default)" if default else ""),
        str(sc.get("provisioner", "")),
        str(sc.get("reclaimPolicy") or "Delete"),
        str(sc.get("volumeBindingMode") or "Immediate"),
        sc.get("allowVolumeExpansion") is True,
        age(sc, now),
    ]


def print_csinode(node: Obj, now: datetime) -> list[Any]:
    return [name_of(node), len(as_list(dig(node, "spec", "drivers"))), age(node, now)]


def print_csidriver(driver: Obj, now: datetime) -> list[Any]:
    """``printCSIDriver``: the spec's switches with the API server's defaults, token audiences
    (``<unset>`` for none) and lifecycle modes (``<none>``)."""
    spec = driver.get("spec") or {}
    audiences = [
        str(t.get("audience", ""))
        for t in as_list(spec.get("tokenRequests"))
        if isinstance(t, Mapping)
    ]
    modes = ",".join(str(m) for m in as_list(spec.get("volumeLifecycleModes")))
    return [
        name_of(driver),
        spec.get("attachRequired") is not False,
        spec.get("podInfoOnMount") is True,
        spec.get("storageCapacity") is True,
        ",".join(audiences) if spec.get("tokenRequests") else "<unset>",
        spec.get("requiresRepublish") is True,
        modes or NONE,
        age(driver, now),
    ]
