"""Core kinds: namespaces, configmaps, secrets, serviceaccounts, nodes, volumes, events."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cacheproxy.kube.printers.cells import (
    NONE,
    UNKNOWN,
    Obj,
    age,
    as_int,
    as_list,
    dig,
    metadata,
    name_of,
    parse_time,
    since,
)


def print_namespace(ns: Obj, now: datetime) -> list[Any]:
    return [name_of(ns), dig(ns, "status", "phase") or "", age(ns, now)]


def print_configmap(cm: Obj, now: datetime) -> list[Any]:
    count = len(cm.get("data") or {}) + len(cm.get("binaryData") or {})
    return [name_of(cm), count, age(cm, now)]


def print_secret(secret: Obj, now: datetime) -> list[Any]:
    count = len(secret.get("data") or {})
    return [name_of(secret), secret.get("type") or "", count, age(secret, now)]


def print_serviceaccount(sa: Obj, now: datetime) -> list[Any]:
    return [name_of(sa), len(as_list(sa.get("secrets"))), age(sa, now)]


def _node_roles(labels: Mapping[str, str]) -> list[str]:
    roles: set[str] = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key.removeprefix("node-role.kubernetes.io/")
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return sorted(roles)


def _node_address(node: Obj, kind: str) -> str:
    for address in as_list(dig(node, "status", "addresses")):
        if address.get("type") == kind:
            return str(address.get("address", ""))
    return NONE


def print_node_with_architecture(node: Obj, now: datetime) -> list[Any]:
    """A Node's row as 1.36 prints it: the kernel followed by the architecture in parentheses."""
    cells = print_node(node, now)
    architecture = (dig(node, "status", "nodeInfo") or {}).get("architecture")
    if architecture:
        cells[8] = f"{cells[8]} ({architecture})"
    return cells


def print_node(node: Obj, now: datetime) -> list[Any]:
    conditions = {c.get("type"): c for c in as_list(dig(node, "status", "conditions"))}
    states: list[str] = []
    ready = conditions.get("Ready")
    if ready is not None:
        states.append("Ready" if ready.get("status") == "True" else "NotReady")
    if not states:
        states.append("Unknown")
    if dig(node, "spec", "unschedulable"):
        states.append("SchedulingDisabled")
    roles = ",".join(_node_roles(metadata(node).get("labels") or {})) or NONE
    info = dig(node, "status", "nodeInfo") or {}
    return [
        name_of(node),
        ",".join(states),
        roles,
        age(node, now),
        info.get("kubeletVersion") or "",
        _node_address(node, "InternalIP"),
        _node_address(node, "ExternalIP"),
        info.get("osImage") or UNKNOWN,
        info.get("kernelVersion") or UNKNOWN,
        info.get("containerRuntimeVersion") or UNKNOWN,
    ]


_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)


def access_modes(modes: Any) -> str:
    """``GetAccessModesAsString``: short names in a fixed order, without duplicates."""
    present = set(as_list(modes))
    return ",".join(short for mode, short in _ACCESS_MODES if mode in present)


def print_pvc(pvc: Obj, now: datetime) -> list[Any]:
    spec = pvc.get("spec") or {}
    st = pvc.get("status") or {}
    phase = str(st.get("phase") or "")
    if metadata(pvc).get("deletionTimestamp"):
        phase = "Terminating"
    volume = str(spec.get("volumeName") or "")
    capacity = modes = ""
    if volume:
        modes = access_modes(st.get("accessModes"))
        capacity = str(dig(st, "capacity", "storage") or "0")
    return [
        name_of(pvc),
        phase,
        volume,
        capacity,
        modes,
        _storage_class(pvc),
        _volume_attributes_class(pvc),
        age(pvc, now),
        str(spec.get("volumeMode") or "<unset>"),
    ]


def print_pv(pv: Obj, now: datetime) -> list[Any]:
    spec = pv.get("spec") or {}
    st = pv.get("status") or {}
    claim = spec.get("claimRef")
    claim_text = f"{claim.get('namespace', '')}/{claim.get('name', '')}" if claim else ""
    phase = str(st.get("phase") or "")
    if metadata(pv).get("deletionTimestamp"):
        phase = "Terminating"
    return [
        name_of(pv),
        str(dig(spec, "capacity", "storage") or "0"),
        access_modes(spec.get("accessModes")),
        str(spec.get("persistentVolumeReclaimPolicy") or ""),
        phase,
        claim_text,
        _storage_class(pv),
        _volume_attributes_class(pv),
        str(st.get("reason") or ""),
        age(pv, now),
        str(spec.get("volumeMode") or "<unset>"),
    ]


def _volume_attributes_class(obj: Obj) -> str:
    """``spec.volumeAttributesClassName`` (1.32's VolumeAttributesClass column), else unset."""
    name = (obj.get("spec") or {}).get("volumeAttributesClassName")
    return "<unset>" if name is None else str(name)


def _storage_class(obj: Obj) -> str:
    """``GetPersistentVolume(Claim)Class``: the beta annotation wins over the field."""
    annotations = metadata(obj).get("annotations") or {}
    storage_class = annotations.get("volume.beta.kubernetes.io/storage-class")
    if storage_class is None:
        storage_class = (obj.get("spec") or {}).get("storageClassName") or ""
    return str(storage_class)


def print_event(event: Obj, now: datetime) -> list[Any]:
    first = since(event.get("firstTimestamp"), now)
    if parse_time(event.get("firstTimestamp")) is None:
        first = since(event.get("eventTime"), now)
    last = since(event.get("lastTimestamp"), now)
    if parse_time(event.get("lastTimestamp")) is None:
        last = first
    count = as_int(event.get("count"))
    series = event.get("series")
    if isinstance(series, Mapping):
        last = since(series.get("lastObservedTime"), now)
        count = as_int(series.get("count"))
    elif count == 0:
        count = 1
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return [
        last,
        str(event.get("type") or ""),
        str(event.get("reason") or ""),
        target,
        str(involved.get("fieldPath") or ""),
        f"{component}, {instance}" if instance else str(component),
        str(event.get("message") or "").strip(),
        first,
        count,
        name_of(event),
    ]
