"""managedFields for generated objects, derived from the objects themselves.

:func:`_field_set` approximates structured-merge-diff field sets: ``f:`` a field, ``k:`` a keyed
list item, ``v:`` a set member, ``.`` a non-leaf node its manager owns as a whole.
:func:`_managed` and :func:`_entry` make one manager's entry; :func:`_touch_manager` replaces a
manager's entry on update, as the API server does.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from cacheproxy.sim.workload.derive import JsonObject, _ts

# Associative lists (``+listType=map``) and their keys, by field name; the first key tuple every
# item carries wins (container ports vs service ports).
_LIST_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "containers": (("name",),),
    "env": (("name",),),
    "volumes": (("name",),),
    "volumeMounts": (("mountPath",),),
    "ports": (("containerPort", "protocol"), ("port", "protocol")),
    "conditions": (("type",),),
    "podIPs": (("ip",),),
    "hostIPs": (("ip",),),
    "addresses": (("type",),),
    "ownerReferences": (("uid",),),
}
_SET_LISTS = frozenset({"finalizers", "podCIDRs", "clusterIPs", "ipFamilies"})
# ``+structType=atomic`` / ``+mapType=atomic``: owned as a leaf.
_ATOMIC = frozenset({"fieldRef", "resourceFieldRef", "configMapKeyRef", "selector"})
# Nodes that carry no ``.`` of their own in real field sets (required or pure containers).
_NO_DOT = frozenset({"metadata", "spec", "status", "containers", "template", "strategy"})


def _field_set(value: Any, name: str = "", depth: int = 0) -> JsonObject:
    node: JsonObject = {}
    if isinstance(value, dict) and name not in _ATOMIC:
        if value and depth >= 2 and name not in _NO_DOT:
            node["."] = {}
        for key in value:
            node[f"f:{key}"] = _field_set(value[key], key, depth + 1)
    elif isinstance(value, list) and value:
        keys = next(
            (
                ks
                for ks in _LIST_KEYS.get(name, ())
                if all(isinstance(item, dict) and all(k in item for k in ks) for item in value)
            ),
            None,
        )
        if keys is not None:
            if name not in _NO_DOT:
                node["."] = {}
            for item in value:
                ident = json.dumps({k: item[k] for k in sorted(keys)}, separators=(",", ":"))
                node[f"k:{ident}"] = _field_set(item, "", depth + 1)
        elif name in _SET_LISTS:
            node["."] = {}
            for item in value:
                node[f"v:{json.dumps(item)}"] = {}
    return dict(sorted(node.items()))


def _managed(
    manager: str, time: datetime, owned: JsonObject, *, api_version: str = "v1", sub: str = ""
) -> JsonObject:
    """A managedFields entry of ``manager`` owning every field of ``owned``."""
    return _entry(manager, time, _field_set(owned), api_version=api_version, sub=sub)


def _entry(
    manager: str, time: datetime, fields: JsonObject, *, api_version: str = "v1", sub: str = ""
) -> JsonObject:
    entry: JsonObject = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "time": _ts(time),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if sub:
        entry["subresource"] = sub
    return entry


def _touch_manager(meta: JsonObject, entry: JsonObject) -> None:
    """Replace ``entry``'s manager's entry; the newest goes last, as the API server sorts them."""
    if "managedFields" not in meta:
        return
    same = (entry["manager"], entry.get("subresource", ""))
    meta["managedFields"] = [
        m for m in meta["managedFields"] if (m.get("manager"), m.get("subresource", "")) != same
    ] + [entry]
