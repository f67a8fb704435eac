"""The simulator's writes: create, update, patch, bind, delete and deletecollection over
:class:`~cacheproxy.sim.storage.SimStore`, free of HTTP, shaped by each kind's registry strategy
(:mod:`~cacheproxy.sim.strategy`) and refused with the API server's Status errors.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import jsonpatch
import orjson

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.listoptions import ListOptions
from cacheproxy.kube.resources import ResourceType
from cacheproxy.sim import statuses, strategy
from cacheproxy.sim.simconfig import SimConfig
from cacheproxy.sim.storage import SimStore

__all__ = ["PATCH_TYPES", "Writes", "merge_patch"]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Writes:
    """The write verbs; :class:`~cacheproxy.sim.api.SimApi` serves them with the reads."""

    store: SimStore
    config: SimConfig

    def create(self, rtype: ResourceType, namespace: str | None, body: Any) -> dict[str, Any]:
        obj = _object_body(rtype, body)
        meta = obj.setdefault("metadata", {})
        _place_in_namespace(rtype, meta, namespace)
        strategy.prepare_create(rtype, obj)
        return _with_type(rtype, self.store.create(rtype, obj))

    def update(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Replace an object (``subresource="status"``: its status), as the kind's strategy lets
        a write of the main resource or of ``/status`` change it."""
        obj = _object_body(rtype, body)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != name:
            raise status.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        _place_in_namespace(rtype, meta, namespace)
        current = self.store.get_stored(rtype, namespace, name)
        if subresource == "status":
            strategy.prepare_status_update(rtype, obj, current.obj)
            if self.config.service_status_validation:
                strategy.validate_status(rtype, obj)
        else:
            strategy.prepare_update(rtype, obj, current.obj)
        return _with_type(rtype, self.store.update(rtype, obj))

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        body: Any,
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        current = self.store.get_stored(rtype, namespace, name)
        base = _with_type(rtype, current.obj)
        if patch_type == JSON_PATCH:
            if not isinstance(body, list):
                raise status.bad_request(
                    "error decoding patch: json: cannot unmarshal object into Go value of type "
                    "[]handlers.jsonPatchOp"
                )
            try:
                patched = jsonpatch.apply_patch(base, _replace_adds(base, body))
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
                # The API server words every failed operation the same way.
                raise ApiError(
                    status.status_body(
                        code=422,
                        reason="Invalid",
                        message="the server rejected our request due to an error in our request",
                        details={},
                    )
                ) from None
        elif patch_type in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
            # Strategic merge is approximated by a JSON merge patch (lists are replaced whole).
            if not isinstance(body, dict):
                raise status.bad_request("the patch must be a JSON object")
            patched = merge_patch(base, body)
        else:
            raise statuses.unsupported_media_type()
        if not isinstance(patched, dict):
            raise status.bad_request("the patched object is not a JSON object")
        meta = patched.setdefault("metadata", {})
        if meta.get("name") != name:
            raise status.bad_request("metadata.name cannot be changed by a patch")
        return self.update(rtype, namespace, name, patched, subresource=subresource)

    def bind(
        self, rtype: ResourceType, namespace: str | None, name: str, body: Any
    ) -> dict[str, Any]:
        """``pods/<name>/binding``: bind the pod to the binding's node (the scheduler's write);
        the answer is the API server's ``Status`` of success."""
        current = self.store.get_stored(rtype, namespace, name)
        bound = strategy.bind(current.obj, body, name=name, now=self.store.now())
        self.store.update(rtype, bound)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def delete(self, rtype: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        return _with_type(rtype, self.store.delete(rtype, namespace or "", name))

    def delete_collection(
        self, rtype: ResourceType, namespace: str | None, opts: ListOptions
    ) -> bytes:
        """Delete every object the selectors match; the answer lists them as deleted."""
        doomed = [
            o
            for o in self.store.iter_range(rtype, namespace)
            if o.matches(opts.label_selector, opts.field_selector)
        ]
        deleted = [
            self.store.delete(
                rtype, o.obj["metadata"].get("namespace", ""), o.obj["metadata"]["name"]
            )
            for o in doomed
        ]
        items = [d if rtype.builtin else _with_type(rtype, d) for d in deleted]
        return orjson.dumps(
            {
                "kind": rtype.list_kind,
                "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": items,
            }
        )


def _place_in_namespace(rtype: ResourceType, meta: dict[str, Any], namespace: str | None) -> None:
    """The path's namespace wins; a different one in the body is a 400 (as the API server)."""
    if rtype.namespaced and namespace:
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise status.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace


def _replace_adds(doc: Any, patch: list[Any]) -> list[Any]:
    """The JSON patch as the API server's library applies it: ``replace`` of a key an object
    lacks adds it (evanphx/json-patch finds no error in the missing key), where RFC 6902 fails."""
    out = []
    for op in patch:
        if isinstance(op, dict) and op.get("op") == "replace" and isinstance(op.get("path"), str):
            with contextlib.suppress(jsonpatch.JsonPointerException):
                pointer = jsonpatch.JsonPointer(op["path"])
                parent, last = pointer.to_last(doc)
                if isinstance(parent, dict) and last not in parent:
                    op = {**op, "op": "add"}
        out.append(op)
    return out


def _object_body(rtype: ResourceType, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise status.bad_request("the request body must be a JSON object")
    kind = body.get("kind")
    if kind and kind != rtype.kind:
        if rtype.builtin:
            # The built-in types' decoder: another kind is a failed conversion to this one.
            version = str(body.get("apiVersion") or rtype.version).rpartition("/")[2]
            internal = rtype.group.split(".")[0] if rtype.group else "core"
            raise status.bad_request(
                f'{kind} in version "{version}" cannot be handled as a {rtype.kind}: converting '
                f"({version}.{kind}) to ({internal}.{rtype.kind}): unknown conversion"
            )
        raise status.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})"
        )
    api_version = body.get("apiVersion")
    if api_version and api_version != rtype.api_version:
        raise status.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version ({rtype.api_version})"
        )
    meta = body.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise status.bad_request("metadata must be a JSON object")
    return dict(body)


def _with_type(rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    return {"kind": rtype.kind, "apiVersion": rtype.api_version, **obj}
