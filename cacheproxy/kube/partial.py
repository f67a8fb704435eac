"""``PartialObjectMetadata``: an object's metadata alone, as metadata-only clients read it.

client-go's metadata informers and controller-runtime's metadata watches ask for
``Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`` on lists (and
``as=PartialObjectMetadata`` on get and watch; ``v1beta1`` too). kube-apiserver answers with
``meta.AsPartialObjectMetadata``: a typed ``metav1.ObjectMeta`` built from the object, so its JSON
has ObjectMeta's field order (``name``, ``generateName``, ``namespace``, …, ``managedFields``),
``creationTimestamp`` always present (``null`` when unset) and empty values left out — whatever
order the object itself had (a custom resource's metadata is alphabetical). Tables with
``includeObject=Metadata`` carry the same object in each row (:mod:`.table`).

- :func:`object_meta`: an object's ``metadata`` in that form;
- :func:`partial_object_metadata` (a dict; :class:`Reform` from stored JSON);
- :func:`partial_list_head` and :func:`list_meta`: a ``PartialObjectMetadataList``'s head, and
  the ``ListMeta`` every list carries;
- :class:`Reform`: how each object of an answer is written when it is not as stored — its
  ``PartialObjectMetadata``, without ``metadata.managedFields`` (asked for with the ``Accept``
  parameter ``drop=metadata.managedFields``, KEP-5958), or both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "DROP_MANAGED_FIELDS",
    "METADATA_API_VERSIONS",
    "OBJECT_META_ORDER",
    "Reform",
    "list_meta",
    "object_meta",
    "partial_list_head",
    "partial_object_metadata",
]

METADATA_API_VERSIONS = ("v1", "v1beta1")
"""The ``meta.k8s.io`` versions a PartialObjectMetadata can be asked in."""

OBJECT_META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)
"""ObjectMeta's fields in the order the API server serialises them."""
_OWNER_REFERENCE = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")
_MANAGED_FIELDS = (
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
)
_POINTERS = frozenset(
    ("deletionTimestamp", "deletionGracePeriodSeconds", "controller", "blockOwnerDeletion")
)
"""Pointer fields: ``omitempty`` leaves out only nil (a zero they point to is written)."""
_ZEROS: tuple[object, ...] = (None, "", 0, {}, [])


def _typed(value: Mapping[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """``value``'s fields in a Go struct's order, ``omitempty`` zero values left out, and the
    fields the struct does not have dropped."""
    out: dict[str, Any] = {}
    for name in order:
        if name in value:
            item = value[name]
            if item is not None if name in _POINTERS else item not in _ZEROS:
                out[name] = item
    return out


def object_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` as a typed ``metav1.ObjectMeta`` encodes it (``creationTimestamp`` has no
    ``omitempty``: ``null`` when unset)."""
    out = _typed(meta, OBJECT_META_ORDER)
    if "creationTimestamp" not in out:
        out["creationTimestamp"] = None
        out = {name: out[name] for name in OBJECT_META_ORDER if name in out}
    refs = out.get("ownerReferences")
    if isinstance(refs, list):
        out["ownerReferences"] = [
            _typed(r, _OWNER_REFERENCE) if isinstance(r, Mapping) else r for r in refs
        ]
    managed = out.get("managedFields")
    if isinstance(managed, list):
        out["managedFields"] = [
            _typed(m, _MANAGED_FIELDS) if isinstance(m, Mapping) else m for m in managed
        ]
    return out


def partial_object_metadata(obj: Mapping[str, Any], api_version: str) -> dict[str, Any]:
    """``metav1.PartialObjectMetadata`` of ``obj`` in ``api_version`` (``meta.k8s.io/v1``)."""
    meta = obj.get("metadata")
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": object_meta(meta if isinstance(meta, Mapping) else {}),
    }


DROP_MANAGED_FIELDS = "metadata.managedFields"
"""The value of the ``Accept`` parameter ``drop`` that asks for objects without their
managedFields."""


@dataclass(frozen=True, slots=True)
class Reform:
    """How each object of an answer is written instead of its stored bytes: as the
    ``PartialObjectMetadata`` of apiVersion ``metadata`` (when set), without
    ``metadata.managedFields`` (``drop_managed_fields``), or both. Each object is parsed and
    written again: only clients that ask pay for it."""

    metadata: str | None = None
    drop_managed_fields: bool = False

    def encode(self, raw: bytes) -> bytes:
        """One object's JSON (a whole object, or a typed list's item) in this form."""
        obj = orjson.loads(raw)
        if self.drop_managed_fields and isinstance(obj.get("metadata"), dict):
            obj["metadata"].pop("managedFields", None)
        if self.metadata is not None:
            return orjson.dumps(partial_object_metadata(obj, self.metadata))
        return orjson.dumps(obj)


def list_meta(
    resource_version: int | str,
    *,
    continue_token: str = "",
    remaining: int | None = None,
    shard_selector: str = "",
) -> bytes:
    """A list's ``metadata`` (``metav1.ListMeta``): its RV; with a continue token, the token and
    (when known) how many items remain; and ``shardInfo`` echoing the shard selector it was
    served with (KEP-5866, :mod:`.sharding`)."""
    meta: dict[str, object] = {"resourceVersion": str(resource_version)}
    if continue_token:
        meta["continue"] = continue_token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
    if shard_selector:
        meta["shardInfo"] = {"selector": shard_selector}
    return orjson.dumps(meta)


def partial_list_head(api_version: str, meta: bytes) -> bytes:
    """A ``PartialObjectMetadataList``'s bytes up to its first item (``meta`` from
    :func:`list_meta`); items follow separated by commas, then ``]}``."""
    return b'{"kind":"PartialObjectMetadataList","apiVersion":"%s","metadata":%s,"items":[' % (
        api_version.encode(),
        meta,
    )
