"""The indexed Store: the informer's cache of one collection, kept as compact JSON bytes.

Each :class:`Entry` is the object's JSON after the transform (by default without
``metadata.managedFields``) plus a small record: key, RV, labels and the values of the configured
indexes. No long-lived parsed dict is kept (DESIGN §3: a parsed pod costs ~10 times its JSON).

Indexes: namespace, labels (key → value → keys), each configured field path (multi-valued, e.g.
``metadata.ownerReferences[*].uid``) and any Python index function. An index answers exactly what
a full scan answers.

Guarantees:
- one writer (the informer's processing loop); every mutation is synchronous, so a reader on the
  event loop never sees a half-applied event or a half-applied relist;
- entries are immutable: what ``get`` returns must not be changed, and stays valid (as the state
  at its RV) after later writes replace it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from cacheproxy.kube.fieldpath import compile_field_path
from cacheproxy.kube.keys import object_key

__all__ = [
    "Entry",
    "IndexFunc",
    "Store",
    "Transform",
]

IndexFunc = Callable[[Mapping[str, Any]], Iterable[str]]
"""A library user's index: the values an object is indexed under."""

_intern = sys.intern


@dataclass(frozen=True)
class Transform:
    """What is kept of each object (DESIGN §5 ``transform``)."""

    drop_fields: tuple[str, ...] = ("metadata.managedFields",)
    """Dotted paths removed before storing."""
    metadata_only: bool = False
    """Keep only ``kind``, ``apiVersion`` and ``metadata`` (a PartialObjectMetadata-like copy)."""

    def __post_init__(self) -> None:
        split = tuple((tuple(p.split(".")[:-1]), p.split(".")[-1]) for p in self.drop_fields)
        object.__setattr__(self, "_drops", split)

    def apply(self, obj: dict[str, Any], *, kind: str, api_version: str) -> dict[str, Any]:
        """The object to store; ``obj`` (freshly parsed, owned by the caller) may be modified."""
        drops: tuple[tuple[tuple[str, ...], str], ...] = self._drops  # type: ignore[attr-defined]
        for parents, last in drops:
            target: Any = obj
            for name in parents:
                target = target.get(name) if isinstance(target, dict) else None
            if isinstance(target, dict):
                target.pop(last, None)
        if obj.get("kind") and obj.get("apiVersion") and not self.metadata_only:
            return obj
        # Typed list items come without kind/apiVersion: put them first, as a GET returns them.
        out: dict[str, Any] = {
            "kind": obj.get("kind") or kind,
            "apiVersion": obj.get("apiVersion") or api_version,
        }
        if self.metadata_only:
            out["metadata"] = obj.get("metadata", {})
        else:
            out.update(obj)
        return out


class Entry:
    """One stored object version. Immutable by contract; ``raw`` is the object's compact JSON."""

    __slots__ = ("key", "labels", "raw", "rv", "values")

    def __init__(
        self,
        key: str,
        rv: int,
        labels: tuple[str, ...],
        values: tuple[tuple[str, ...], ...],
        raw: bytes,
    ) -> None:
        self.key = key
        self.rv = rv
        self.labels = labels
        """Flattened ``(k1, v1, k2, v2, …)``, interned: cheaper than a dict per object."""
        self.values = values
        """Per configured index (in the store's order), the values this object is indexed under."""
        self.raw = raw

    @property
    def namespace(self) -> str:
        ns, sep, _ = self.key.partition("/")
        return ns if sep else ""

    @property
    def name(self) -> str:
        return self.key.rpartition("/")[2]

    def label_map(self) -> dict[str, str]:
        it = iter(self.labels)
        return dict(zip(it, it, strict=True))

    def object(self) -> dict[str, Any]:
        """A fresh parsed copy of the object (callers may modify it)."""
        parsed: dict[str, Any] = orjson.loads(self.raw)
        return parsed

    def __repr__(self) -> str:
        return f"Entry({self.key!r}, rv={self.rv}, {len(self.raw)} bytes)"


@dataclass(slots=True)
class _Index:
    name: str
    extract: Callable[[Mapping[str, Any]], tuple[str, ...]]
    by_value: dict[str, set[str]] = field(default_factory=dict)


def _labels_of(meta: Mapping[str, Any]) -> tuple[str, ...]:
    labels = meta.get("labels")
    if not labels:
        return ()
    flat: list[str] = []
    for k, v in labels.items():
        flat.append(_intern(k))
        flat.append(_intern(v) if len(v) < 64 else v)
    return tuple(flat)


class Store:
    """Entries by key, with namespace, label, field-path and custom indexes."""

    def __init__(
        self,
        *,
        kind: str,
        api_version: str,
        field_indexes: Sequence[str] = (),
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Transform | None = None,
    ) -> None:
        self.kind = kind
        self.api_version = api_version
        self.transform = transform or Transform()
        self._entries: dict[str, Entry] = {}
        self._by_namespace: dict[str, set[str]] = {}
        self._by_label: dict[str, dict[str, set[str]]] = {}
        self._indexes: list[_Index] = [_Index(p, compile_field_path(p)) for p in field_indexes]
        for name, func in (indexers or {}).items():
            self._indexes.append(_Index(name, _tuple_of(func)))
        self._index_pos = {ix.name: i for i, ix in enumerate(self._indexes)}
        self.resource_version = 0
        """The RV the store reflects (last event, bookmark or relist)."""

    # ------------------------------------------------------------------ reads

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: str) -> Entry | None:
        return self._entries.get(key)

    def entries(self) -> Iterator[Entry]:
        return iter(self._entries.values())

    def keys(self) -> Iterator[str]:
        return iter(self._entries)

    @property
    def index_names(self) -> list[str]:
        return [ix.name for ix in self._indexes]

    def namespace_keys(self, namespace: str) -> set[str]:
        """Keys in ``namespace`` (a live view: copy before writing to the store)."""
        return self._by_namespace.get(namespace, _EMPTY)

    def label_keys(self, key: str, value: str) -> set[str]:
        return self._by_label.get(key, {}).get(value, _EMPTY)

    def label_values(self, key: str) -> Mapping[str, set[str]]:
        """Every value of label ``key`` with its keys (for ``!=``, ``notin`` and exists)."""
        return self._by_label.get(key, {})

    def index_keys(self, index: str, value: str) -> set[str]:
        return self._indexes[self._index_pos[index]].by_value.get(value, _EMPTY)

    def index_values(self, index: str) -> Mapping[str, set[str]]:
        return self._indexes[self._index_pos[index]].by_value

    def values_of(self, entry: Entry, index: str) -> tuple[str, ...]:
        return entry.values[self._index_pos[index]]

    def has_index(self, index: str) -> bool:
        return index in self._index_pos

    # ------------------------------------------------------------------ writes

    def make_entry(self, obj: dict[str, Any]) -> Entry:
        """Transform, index and encode a freshly parsed object (which this may modify)."""
        obj = self.transform.apply(obj, kind=self.kind, api_version=self.api_version)
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or ""
        key = object_key(_intern(namespace) if namespace else None, meta.get("name") or "")
        rv_text = meta.get("resourceVersion") or "0"
        rv = int(rv_text) if rv_text.isdigit() else 0
        values = tuple([ix.extract(obj) for ix in self._indexes]) if self._indexes else ()
        # orjson's buffer is over-allocated (~1.8x by the allocator's count): keep an exact copy.
        raw = bytes(memoryview(orjson.dumps(obj)))
        return Entry(key, rv, _labels_of(meta), values, raw)

    def put(self, entry: Entry) -> Entry | None:
        """Insert or replace; returns the previous entry."""
        prev = self._entries.get(entry.key)
        self._entries[entry.key] = entry
        if prev is not None:
            self._unindex(prev, entry)
        self._index(entry, prev)
        return prev

    def delete(self, key: str) -> Entry | None:
        prev = self._entries.pop(key, None)
        if prev is not None:
            self._unindex(prev, None)
        return prev

    def replace(self, entries: Iterable[Entry], resource_version: int) -> dict[str, Entry]:
        """Swap in a whole new state at once (a relist). Returns the previous state."""
        old = self._entries
        self._entries = {}
        self._by_namespace = {}
        self._by_label = {}
        for ix in self._indexes:
            ix.by_value = {}
        for entry in entries:
            self._entries[entry.key] = entry
            self._index(entry, None)
        self.resource_version = resource_version
        return old

    # ------------------------------------------------------------------ internals

    def _index(self, entry: Entry, prev: Entry | None) -> None:
        key = entry.key
        if prev is None:
            ns = entry.namespace
            bucket = self._by_namespace.get(ns)
            if bucket is None:
                bucket = self._by_namespace[ns] = set()
            bucket.add(key)
        labels = entry.labels
        prev_labels = prev.labels if prev is not None else ()
        if labels != prev_labels:
            for i in range(0, len(labels), 2):
                by_value = self._by_label.get(labels[i])
                if by_value is None:
                    by_value = self._by_label[labels[i]] = {}
                keys = by_value.get(labels[i + 1])
                if keys is None:
                    keys = by_value[labels[i + 1]] = set()
                keys.add(key)
        for i, ix in enumerate(self._indexes):
            old_values = prev.values[i] if prev is not None else ()
            if entry.values[i] == old_values:
                continue
            for value in entry.values[i]:
                keys = ix.by_value.get(value)
                if keys is None:
                    keys = ix.by_value[value] = set()
                keys.add(key)

    def _unindex(self, prev: Entry, new: Entry | None) -> None:
        """Remove ``prev`` from the indexes where ``new`` (same key, or None) differs."""
        key = prev.key
        if new is None:
            _discard(self._by_namespace, prev.namespace, key)
        if new is None or prev.labels != new.labels:
            for i in range(0, len(prev.labels), 2):
                by_value = self._by_label.get(prev.labels[i])
                if by_value is not None:
                    _discard(by_value, prev.labels[i + 1], key)
                    if not by_value:
                        del self._by_label[prev.labels[i]]
        for i, ix in enumerate(self._indexes):
            if new is not None and new.values[i] == prev.values[i]:
                continue
            for value in prev.values[i]:
                _discard(ix.by_value, value, key)


_EMPTY: set[str] = set()


def _discard(index: dict[str, set[str]], value: str, key: str) -> None:
    keys = index.get(value)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[value]


def _tuple_of(func: IndexFunc) -> Callable[[Mapping[str, Any]], tuple[str, ...]]:
    def extract(obj: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(func(obj)))

    return extract
