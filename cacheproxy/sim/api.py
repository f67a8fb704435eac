"""The simulator's API verbs over :class:`~cacheproxy.sim.store.SimStore`, free of HTTP.

list / get / watch keep the API server's resourceVersion rules (API concepts, "Resource
versions"): unset → latest; "0" → any (we answer latest); N → not older than N, waiting up to
``rv_wait`` seconds and then 504 ``ResourceVersionTooLarge``; ``limit`` + RV=N or
``resourceVersionMatch=Exact`` → the exact snapshot at N, 410 once compacted. Pages are cut in key
order from one snapshot and continue tokens carry it.

Who answers a read is the API server's split between its watch caches and etcd. By default every
cache is at the global RV. With ``per_resource_cache`` (:class:`~cacheproxy.sim.config.SimConfig`)
each resource's cache is at the RV of its own last write or progress notification, and the reads
the 1.28 cacher hands to etcd (RV unset, exact RVs, ``limit`` with an RV other than 0) are at the
global RV, with etcd's answers to RVs it has not reached (a 500 for an exact one, an immediate 504
otherwise). Resources without a watch cache (``uncached_resources``) are always etcd's.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jsonpatch
import orjson

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.listoptions import EXACT, NOT_OLDER_THAN, ListOptions
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.rv import decode_continue, encode_continue, parse_resource_version
from cacheproxy.sim import statuses, strategy
from cacheproxy.sim.config import SimConfig
from cacheproxy.sim.store import BUILTIN_GROUPS, Event, SimStore, StoredObject, iter_snapshot
from cacheproxy.sim.watch import SimWatcher, WatchPlan

__all__ = ["PATCH_TYPES", "ListResult", "SimApi", "partial_object_metadata"]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)


@dataclass(frozen=True, slots=True)
class ListResult:
    rtype: ResourceType
    items: list[StoredObject]
    resource_version: int
    continue_token: str
    remaining: int | None

    def _list_meta(self) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(self.resource_version)}
        if self.continue_token:
            meta["continue"] = self.continue_token
        if self.remaining is not None and self.continue_token:
            meta["remainingItemCount"] = self.remaining
        return orjson.dumps(meta)

    def encode(self) -> bytes:
        head = b'{"kind":"%s","apiVersion":"%s","metadata":%s,"items":[' % (
            self.rtype.list_kind.encode(),
            self.rtype.api_version.encode(),
            self._list_meta(),
        )
        return head + b",".join(o.list_item for o in self.items) + b"]}"

    def encode_metadata(self, api_version: str) -> bytes:
        """As the ``PartialObjectMetadataList`` metadata-only clients ask for on ``Accept``."""
        head = b'{"kind":"PartialObjectMetadataList","apiVersion":"%s","metadata":%s,"items":[' % (
            api_version.encode(),
            self._list_meta(),
        )
        items = (orjson.dumps(partial_object_metadata(o.obj, api_version)) for o in self.items)
        return head + b",".join(items) + b"]}"


def partial_object_metadata(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    """``metav1.PartialObjectMetadata`` of ``obj``: its whole ``metadata``, nothing else."""
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": obj["metadata"]}


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


class SimApi:
    """list/get/watch/create/update/patch/delete with the API server's semantics."""

    def __init__(
        self,
        store: SimStore,
        config: SimConfig | None = None,
        *,
        default_watch_timeout: Callable[[], float] = lambda: random.uniform(1800, 3600),
    ) -> None:
        self.store = store
        self.config = config or SimConfig()
        self.default_watch_timeout = default_watch_timeout

    # ------------------------------------------------------------------ the watch caches

    def cached(self, rtype: ResourceType) -> bool:
        """Whether ``rtype`` has a watch cache (else etcd serves its reads and watches)."""
        return rtype.qualified not in self.config.uncached_resources

    def cache_rv(self, rtype: ResourceType) -> int:
        """The RV ``rtype``'s reads from the cache are at: its own cache's, or the global one."""
        if self.config.per_resource_cache and self.cached(rtype):
            return self.store.cache_rv(rtype)
        return self.store.rv

    async def wait_for_rv(self, rv: int, rtype: ResourceType | None = None) -> None:
        """Wait until the cache of ``rtype`` (default: the store) reached ``rv`` (≤ ``rv_wait``
        s), else 504 too large RV; at once when etcd serves ``rtype``."""

        def current() -> int:
            return self.cache_rv(rtype) if rtype is not None else self.store.rv

        if current() >= rv:
            return
        if rtype is not None and not self.cached(rtype):
            raise statuses.too_large_resource_version_now(rv, self.store.rv)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.rv_wait
        while current() < rv:
            if loop.time() >= deadline:
                raise status.too_large_resource_version(rv, current())
            await asyncio.sleep(0.02)

    def _from_cache(self, rtype: ResourceType, opts: ListOptions) -> bool:
        """Whether the 1.28 cacher serves a list itself (``shouldDelegateList``): not an RV unset,
        an exact RV, ``limit`` with an RV other than 0, nor a resource it does not cache."""
        return (
            self.cached(rtype)
            and opts.resource_version != ""
            and not (opts.limit > 0 and opts.resource_version != "0")
            and opts.resource_version_match != EXACT
        )

    # ------------------------------------------------------------------ reads

    async def get(self, rtype: ResourceType, namespace: str | None, name: str, rv: str) -> bytes:
        if rv not in ("", "0"):
            await self.wait_for_rv(parse_resource_version(rv), rtype)
        return self.store.get_stored(rtype, namespace, name).full

    async def list(
        self, rtype: ResourceType, namespace: str | None, opts: ListOptions
    ) -> ListResult:
        store = self.store
        start = ""
        limit = opts.limit
        # Token keys are relative to the listed collection, as etcd3's ``encodeContinue`` strips
        # the key prefix: "ns-1/name\x00" across namespaces, "name\x00" within ns-1.
        prefix = f"{namespace}/" if namespace else ""
        requested = opts.rv
        exact = opts.resource_version_match == EXACT or (
            opts.limit > 0 and requested > 0 and not opts.resource_version_match
        )
        if opts.continue_token:
            token = decode_continue(opts.continue_token)
            if opts.resource_version not in ("", "0"):
                raise status.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            start = prefix + token.key
            if token.resource_version == -1:
                rv, source = store.rv, None
            else:
                rv = token.resource_version
                if rv < store.compacted_rv:
                    raise status.expired(
                        status.CONTINUE_EXPIRED_MESSAGE,
                        continue_token=encode_continue(-1, token.start_key),
                    )
                source = None if rv == store.rv else store.snapshot(rtype, rv)
        elif self.cached(rtype) and not self.config.per_resource_cache:
            # One RV for every cache: every read waits for it, and serves its snapshot.
            if requested > 0:
                await self.wait_for_rv(requested)
            if exact and requested != store.rv:
                rv, source = requested, store.snapshot(rtype, requested)
            else:
                rv, source = store.rv, None
            if opts.resource_version == "0" and self.config.rv0_list_ignores_limit:
                limit = 0
        elif self._from_cache(rtype, opts):
            # The resource's own cache: its state is the latest of its objects, at its RV.
            if requested > 0:
                await self.wait_for_rv(requested, rtype)
            rv, source = store.cache_rv(rtype), None
            if opts.resource_version == "0" and self.config.rv0_list_ignores_limit:
                limit = 0
        elif exact:
            if requested > store.rv:
                raise statuses.future_revision()
            rv = requested
            source = None if requested == store.rv else store.snapshot(rtype, requested)
        else:
            # etcd, not older than the RV asked for (RV unset: the latest).
            if requested > store.rv:
                raise statuses.too_large_resource_version_now(requested, store.rv)
            rv, source = store.rv, None
        objects = (
            store.iter_range(rtype, namespace, start=start)
            if source is None
            else iter_snapshot(source, namespace, start=start)
        )
        return _page(rtype, objects, opts, rv, limit=limit, key_prefix=prefix)

    def watch_options(self, rtype: ResourceType, opts: ListOptions) -> ListOptions:
        """A watch's options as the API server takes them (before its response starts): with
        ``WatchList`` on, a watch from RV "" or "0" with bookmarks and no ``sendInitialEvents``
        is a watch-list; a watch-list of a resource without a watch cache is a 422."""
        if (
            self.config.watch_list
            and opts.send_initial_events is None
            and not opts.resource_version_match
            and opts.allow_watch_bookmarks
            and opts.resource_version in ("", "0")
        ):
            opts = dataclasses.replace(
                opts, send_initial_events=True, resource_version_match=NOT_OLDER_THAN
            )
        if opts.send_initial_events is not None and not self.cached(rtype):
            raise statuses.unsupported_by_etcd(rtype.resource)
        return opts

    async def wait_for_watch(self, rtype: ResourceType, opts: ListOptions) -> None:
        """Before a watch starts: a watch from an RV the cache has not reached waits for it (and
        504s) when ``future_watch_waits``, and a watch-list always does."""
        if opts.rv > self.cache_rv(rtype) and (
            self.config.future_watch_waits or opts.send_initial_events
        ):
            await self.wait_for_rv(opts.rv, rtype)

    def open_watch(
        self, rtype: ResourceType, namespace: str | None, opts: ListOptions
    ) -> tuple[SimWatcher, WatchPlan]:
        """Register a watcher and plan what it sends first. Synchronous: nothing can be written
        between computing the initial state and registering, so no event is lost or doubled.
        A too-old RV raises 410 (the caller sends it as an in-stream ERROR event)."""
        store, config = self.store, self.config
        cached = self.cached(rtype)
        per_resource = config.per_resource_cache and cached
        requested = opts.rv
        initial: list[StoredObject] = []
        replay: list[Event] = []
        end_after: int | None = None
        if opts.send_initial_events and per_resource and not config.late_initial_events_end:
            # Current servers make the cache fresh first (a progress request to etcd).
            store.progress_notify(rtype)
        cache_rv = self.cache_rv(rtype)
        start_rv = requested
        if opts.send_initial_events or (
            opts.send_initial_events is None and opts.resource_version in ("", "0")
        ):
            initial = list(store.iter_range(rtype, namespace))
            start_rv = cache_rv
            if opts.send_initial_events and opts.allow_watch_bookmarks:
                # The RV the end bookmark waits for (getCommonResourceVersionLockedFunc).
                end_after = store.rv if opts.resource_version == "" else max(requested, cache_rv)
        elif opts.resource_version in ("", "0"):
            start_rv = cache_rv
        elif requested < store.rv:
            replay = store.events_since(rtype, requested, from_storage=not cached)
        watcher = SimWatcher(
            rtype=rtype,
            namespace=namespace,
            labels=opts.label_selector,
            fields=opts.field_selector,
            buffer=config.watch_buffer,
            start_rv=start_rv,
        )
        initial = [o for o in initial if watcher.visible(o)]
        store.add_watcher(watcher)
        timeout = (
            float(opts.timeout_seconds) if opts.timeout_seconds else self.default_watch_timeout()
        )
        plan = WatchPlan(
            initial=initial,
            replay=replay,
            end_bookmark_after=end_after,
            # etcd's own watches send no bookmarks.
            allow_bookmarks=opts.allow_watch_bookmarks and cached,
            timeout=timeout,
            bookmark_interval=config.bookmark_interval,
            only_newer_bookmarks=per_resource,
        )
        return watcher, plan

    # ------------------------------------------------------------------ writes

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
        items = [_with_type(rtype, d) if rtype.group not in BUILTIN_GROUPS else d for d in deleted]
        return orjson.dumps(
            {
                "kind": rtype.list_kind,
                "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": items,
            }
        )


def _page(
    rtype: ResourceType,
    objects: Iterator[StoredObject],
    opts: ListOptions,
    rv: int,
    *,
    limit: int,
    key_prefix: str = "",
) -> ListResult:
    labels, fields = opts.label_selector, opts.field_selector
    filtered = labels.empty and fields.empty
    items: list[StoredObject] = []
    token = ""
    remaining: int | None = None
    for stored in objects:
        if not (filtered or stored.matches(labels, fields)):
            continue
        if limit and len(items) == limit:
            token = encode_continue(rv, items[-1].key.removeprefix(key_prefix) + "\x00")
            if filtered:
                remaining = 1 + sum(1 for _ in objects)
            break
        items.append(stored)
    return ListResult(
        rtype=rtype, items=items, resource_version=rv, continue_token=token, remaining=remaining
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
