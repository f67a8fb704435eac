"""The simulator's storage: every object of every resource, one global RV, a bounded history.

This plays etcd plus the API server's registry for the simulator. It owns:

- the objects, per resource, in key order (``namespace/name``), each kept as its dict and its
  compact JSON encoding (built once per write, so lists and watches only join bytes);
- one global, monotonically increasing resource version, bumped by every write;
- the history of writes (bounded; the oldest events are *compacted* away). An exact list or a
  continue token at an RV older than the storage's compaction is answered 410, as etcd's
  compaction makes the API server do;
- per resource, what its watch cache has seen: the RV it has reached (its own writes, and etcd's
  progress notifications, :meth:`SimStore.progress_notify`) and the oldest RV a watch may resume
  from (the start of its history: a restarted API server's caches start at the current RV);
- the watchers, to which every write of their resource (and every progress notification) is
  dispatched synchronously, in RV order.

All methods are synchronous and never await: a write and its dispatch to every watcher happen in
one step of the event loop, so a watcher registered between two writes sees exactly the writes
after its RV. Objects handed out must not be mutated.
"""

from __future__ import annotations

import bisect
import copy
import datetime
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from cacheproxy.kube import status
from cacheproxy.kube.keys import object_key
from cacheproxy.kube.partial import OBJECT_META_ORDER
from cacheproxy.kube.resources import ResourceRegistry, ResourceType
from cacheproxy.sim import statuses
from cacheproxy.sim.objects import BUILTIN_GROUPS, Event, Progress, StoredObject, WatchSink

__all__ = [
    "BUILTIN_GROUPS",
    "Event",
    "Progress",
    "SimStore",
    "StoredObject",
    "WatchSink",
    "iter_snapshot",
]


# Kinds with a spec whose registry strategy sets no ``metadata.generation`` (the tables samples:
# namespaces, services, PVCs, nodes). Pods have one on current servers (1.28 set none): a switch.
_NO_GENERATION = frozenset(
    {
        ("", "Namespace"),
        ("", "Service"),
        ("", "PersistentVolumeClaim"),
        ("", "PersistentVolume"),
        ("", "Node"),
    }
)


@dataclass(slots=True)
class _Collection:
    rtype: ResourceType
    objects: dict[str, StoredObject] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    watchers: set[WatchSink] = field(default_factory=set)
    cache_rv: int = 0
    """The RV this resource's watch cache has reached: its last write or progress notification."""
    watch_horizon: int = 0
    """The oldest RV a watch of this resource may resume from (its cache's history starts after)."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SimStore:
    """In-memory storage with etcd-like RVs and compaction. Single writer: the event loop."""

    def __init__(
        self,
        registry: ResourceRegistry,
        *,
        history_limit: int = 10_000,
        clock: Callable[[], str] = _now,
        uid: Callable[[], str] = lambda: str(uuid.uuid4()),
        start_rv: int = 1,
        pod_generation: bool = True,
    ) -> None:
        self.registry = registry
        self.history_limit = history_limit
        self._clock = clock
        self._uid = uid
        self._collections: dict[ResourceType, _Collection] = {
            t: _Collection(t, cache_rv=start_rv, watch_horizon=start_rv) for t in registry.values()
        }
        self.rv = start_rv
        self._history: deque[Event] = deque()
        self.compacted_rv = start_rv
        """The storage's compaction: exact reads need an RV from here on (and the history after it)."""
        self._trimmed_rv = start_rv
        """The RV of the last event dropped from the history: nothing older can be replayed."""
        self.pod_generation = pod_generation
        """Pods get ``metadata.generation`` (current servers; 1.28 set none)."""
        self.writes = 0

    def add_resource(self, rtype: ResourceType) -> None:
        """Serve ``rtype`` from now on (a CRD installed): empty, its cache at the current RV."""
        self.registry.add(rtype)
        self._collections.setdefault(
            rtype, _Collection(rtype, cache_rv=self.rv, watch_horizon=self.rv)
        )

    # ------------------------------------------------------------------ reads

    def now(self) -> str:
        """The server's time, as it stamps objects (``creationTimestamp``)."""
        return self._clock()

    def collection(self, rtype: ResourceType) -> _Collection:
        return self._collections[rtype]

    def get(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        stored = self._collections[rtype].objects.get(object_key(namespace or None, name))
        return stored.obj if stored else None

    def get_stored(self, rtype: ResourceType, namespace: str | None, name: str) -> StoredObject:
        stored = self._collections[rtype].objects.get(
            object_key(namespace if rtype.namespaced else None, name)
        )
        if stored is None:
            raise status.not_found(resource=rtype.resource, name=name, group=rtype.group)
        return stored

    def names(self, rtype: ResourceType) -> list[tuple[str, str]]:
        coll = self._collections[rtype]
        return [
            (str(o.obj["metadata"].get("namespace", "")), str(o.obj["metadata"]["name"]))
            for o in (coll.objects[k] for k in coll.keys)
        ]

    def count(self, rtype: ResourceType) -> int:
        return len(self._collections[rtype].objects)

    def iter_range(
        self, rtype: ResourceType, namespace: str | None, *, start: str = ""
    ) -> Iterator[StoredObject]:
        """Current objects in key order, within ``namespace`` if given, from key ``start`` on."""
        coll = self._collections[rtype]
        return _iter_sorted(coll.keys, coll.objects.__getitem__, namespace, start)

    def cache_rv(self, rtype: ResourceType) -> int:
        """The RV ``rtype``'s watch cache has reached (never past :attr:`rv`)."""
        return self._collections[rtype].cache_rv

    def cache_horizon(self, rtype: ResourceType) -> int:
        """The oldest RV ``rtype``'s watch cache still holds the state of (its history: since
        its start, and no further back than the events kept)."""
        return max(self._collections[rtype].watch_horizon, self._trimmed_rv)

    def snapshot(
        self, rtype: ResourceType, rv: int, *, cached: bool = False
    ) -> dict[str, StoredObject]:
        """The collection as it was at ``rv`` (undoing later writes). 410 if compacted (or, from
        the watch cache's snapshots when ``cached``, older than its history)."""
        if rv < (self.cache_horizon(rtype) if cached else self.compacted_rv):
            raise status.expired("The resourceVersion for the provided list is too old.")
        state = dict(self._collections[rtype].objects)
        for event in reversed(self._history):
            if event.rv <= rv:
                break
            if event.obj.rtype is not rtype:
                continue
            if event.prev is None:
                state.pop(event.obj.key, None)
            else:
                state[event.obj.key] = event.prev
        return state

    def events_since(
        self, rtype: ResourceType, rv: int, *, from_storage: bool = False
    ) -> list[Event]:
        """Events of ``rtype`` with RV > ``rv``: from its watch cache, 410 when they are older than
        its history; ``from_storage``, as etcd serves a watch, 410 when compacted away."""
        if from_storage:
            if rv < self.compacted_rv:
                raise statuses.watch_too_old()
        else:
            horizon = self.cache_horizon(rtype)
            if rv < horizon:
                # The watch cache names the oldest servable RV minus one: after a restart, the RV
                # of its initial list (err_watch_too_old_rv_after_apiserver_restart.http).
                raise status.too_old_resource_version(rv, horizon)
        out: list[Event] = []
        for event in reversed(self._history):
            if event.rv <= rv:
                break
            if event.obj.rtype is rtype:
                out.append(event)
        out.reverse()
        return out

    # ------------------------------------------------------------------ watchers

    def add_watcher(self, sink: WatchSink) -> None:
        self._collections[sink.rtype].watchers.add(sink)

    def remove_watcher(self, sink: WatchSink) -> None:
        self._collections[sink.rtype].watchers.discard(sink)

    def watchers(self) -> Iterable[WatchSink]:
        for coll in self._collections.values():
            yield from list(coll.watchers)

    # ------------------------------------------------------------------ writes

    def create(
        self,
        rtype: ResourceType,
        obj: dict[str, Any],
        *,
        created: str | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        """Store a new object, as the API server: uid (``uid`` if given), creationTimestamp
        (``created`` if given, else now), generation and a fresh resourceVersion are the
        server's."""
        coll = self._collections[rtype]
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        namespace = meta.get("namespace") or ""
        if rtype.namespaced and not namespace:
            meta["namespace"] = namespace = "default"
        if not rtype.namespaced:
            meta.pop("namespace", None)
            namespace = ""
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            name = meta["generateName"] + uuid.uuid4().hex[:5]
            meta["name"] = name
        _validate_name(rtype, name)
        if rtype.namespaced:
            self._require_namespace(namespace)
        key = object_key(namespace or None, name)
        if key in coll.objects:
            raise status.already_exists(resource=rtype.resource, name=name, group=rtype.group)
        meta["uid"] = uid or self._uid()
        meta["creationTimestamp"] = created or self._clock()
        meta.pop("deletionTimestamp", None)
        if "spec" in obj and self._has_generation(rtype):
            meta["generation"] = 1
        if (rtype.group, rtype.kind) == ("", "Namespace"):
            _default_namespace(obj)
        stored = self._commit(rtype, key, obj, prev=None, event_type="ADDED")
        return stored.obj

    def update(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        coll = self._collections[rtype]
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name") or ""
        namespace = (meta.get("namespace") or "default") if rtype.namespaced else ""
        key = object_key(namespace or None, name)
        prev = coll.objects.get(key)
        if prev is None:
            raise status.not_found(resource=rtype.resource, name=name, group=rtype.group)
        sent_rv = meta.get("resourceVersion")
        if sent_rv and str(sent_rv) != str(prev.rv):
            raise status.conflict(resource=rtype.resource, name=name, group=rtype.group)
        old_meta = prev.obj["metadata"]
        for kept in ("uid", "creationTimestamp", "namespace"):
            if kept in old_meta:
                meta[kept] = old_meta[kept]
        if "generation" in old_meta:
            changed = obj.get("spec") != prev.obj.get("spec")
            meta["generation"] = old_meta["generation"] + (1 if changed else 0)
        return self._commit(rtype, key, obj, prev=prev, event_type="MODIFIED").obj

    def delete(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        coll = self._collections[rtype]
        key = object_key((namespace or None) if rtype.namespaced else None, name)
        prev = coll.objects.get(key)
        if prev is None:
            raise status.not_found(resource=rtype.resource, name=name, group=rtype.group)
        obj = copy.deepcopy(prev.obj)
        # The deleted object carries the RV of its deletion (as etcd's watch reports it).
        return self._commit(rtype, key, obj, prev=prev, event_type="DELETED").obj

    def compact(self, rv: int | None = None) -> None:
        """Forget history up to ``rv`` (default: everything): watches, exact lists and continue
        tokens from older RVs get 410."""
        target = self.rv if rv is None else min(rv, self.rv)
        while self._history and self._history[0].rv <= target:
            self._history.popleft()
        self.compacted_rv = max(self.compacted_rv, target)
        self._trimmed_rv = max(self._trimmed_rv, target)

    def compact_storage(self, rv: int | None = None) -> None:
        """etcd's compaction up to ``rv`` (default: now): exact lists, continue tokens and watches
        served by the storage from older RVs get 410; the watch caches keep their history."""
        target = self.rv if rv is None else min(rv, self.rv)
        self.compacted_rv = max(self.compacted_rv, target)

    def reset_watch_caches(self) -> None:
        """The watch caches start anew (an API server restart): each has reached the current RV
        and keeps no history before it."""
        for coll in self._collections.values():
            coll.watch_horizon = coll.cache_rv = self.rv

    def progress_notify(self, rtype: ResourceType | None = None) -> None:
        """etcd's progress notification to every watch cache (or ``rtype``'s): each learns the
        current RV and tells its watchers (a watch-list waiting for it ends its initial events)."""
        progress = Progress(self.rv)
        chosen = self._collections.values() if rtype is None else [self._collections[rtype]]
        for coll in chosen:
            if coll.cache_rv < self.rv:
                coll.cache_rv = self.rv
                for sink in list(coll.watchers):
                    sink.offer(progress)

    # ------------------------------------------------------------------ internals

    def _has_generation(self, rtype: ResourceType) -> bool:
        if (rtype.group, rtype.kind) == ("", "Pod"):
            return self.pod_generation
        return (rtype.group, rtype.kind) not in _NO_GENERATION

    def _require_namespace(self, namespace: str) -> None:
        ns_type = self.registry.get_gvr("", "v1", "namespaces")
        if ns_type is None:
            return
        if namespace not in self._collections[ns_type].objects:
            raise status.not_found(resource="namespaces", name=namespace)

    def _commit(
        self,
        rtype: ResourceType,
        key: str,
        obj: dict[str, Any],
        *,
        prev: StoredObject | None,
        event_type: str,
    ) -> StoredObject:
        coll = self._collections[rtype]
        self.rv += 1
        self.writes += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        canonical = _canonical(obj)
        body = orjson.dumps(canonical)
        stored = StoredObject(rtype=rtype, key=key, obj=canonical, rv=self.rv, body=body)
        if event_type == "DELETED":
            del coll.objects[key]
            idx = bisect.bisect_left(coll.keys, key)
            del coll.keys[idx]
        else:
            if prev is None:
                bisect.insort(coll.keys, key)
            coll.objects[key] = stored
        event = Event(rv=self.rv, type=event_type, obj=stored, prev=prev)
        coll.cache_rv = self.rv
        self._history.append(event)
        if len(self._history) > self.history_limit:
            dropped = self._history.popleft()
            self.compacted_rv = max(self.compacted_rv, dropped.rv)
            self._trimmed_rv = dropped.rv
        for sink in list(coll.watchers):
            sink.offer(event)
        return stored


def _canonical(obj: dict[str, Any]) -> dict[str, Any]:
    """Object without kind/apiVersion, metadata keys in the API server's order."""
    meta = obj.get("metadata", {})
    ordered_meta = {k: meta[k] for k in OBJECT_META_ORDER if k in meta}
    ordered_meta.update((k, v) for k, v in meta.items() if k not in ordered_meta)
    out: dict[str, Any] = {"metadata": ordered_meta}
    out.update((k, v) for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata"))
    return out


def _default_namespace(obj: dict[str, Any]) -> None:
    """What the API server's namespace strategy and admission set on create: the name label,
    the ``kubernetes`` finalizer and phase ``Active``."""
    meta = obj["metadata"]
    meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {})["phase"] = "Active"


def _validate_name(rtype: ResourceType, name: str) -> None:
    if not name:
        raise status.invalid(
            kind=rtype.kind,
            group=rtype.group,
            name="",
            causes=[status.required_cause("metadata.name", "name or generateName is required")],
        )
    if len(name) > 253 or not _is_dns_subdomain(name):
        detail = (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
            "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
        raise status.invalid(
            kind=rtype.kind,
            group=rtype.group,
            name=name,
            causes=[status.invalid_value_cause("metadata.name", name, detail)],
        )


def _is_dns_subdomain(name: str) -> bool:
    for label in name.split("."):
        if not label or not label.isascii():
            return False
        if not (label[0].isalnum() and label[-1].isalnum()):
            return False
        if any(not (c.isdigit() or ("a" <= c <= "z") or c == "-") for c in label):
            return False
    return True


def _iter_sorted(
    keys: list[str],
    lookup: Callable[[str], StoredObject],
    namespace: str | None,
    start: str,
) -> Iterator[StoredObject]:
    hi_key: str | None = None
    if namespace:
        hi_key = f"{namespace}0"  # '0' sorts right after '/': the end of "namespace/…"
        start = max(f"{namespace}/", start)
    i = bisect.bisect_left(keys, start)
    n = len(keys)
    while i < n:
        k = keys[i]
        if hi_key is not None and k >= hi_key:
            return
        yield lookup(k)
        i += 1


def iter_snapshot(
    state: dict[str, StoredObject], namespace: str | None, *, start: str = ""
) -> Iterator[StoredObject]:
    """Like :meth:`SimStore.iter_range`, over a snapshot dict."""
    return _iter_sorted(sorted(state), state.__getitem__, namespace, start)
