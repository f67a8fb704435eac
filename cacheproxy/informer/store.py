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
- the store's ``resource_version`` moves only with what it applies (a change at its RV, a relist,
  a bookmark): the writer hands each mutation its RV, never sets it apart from one;
- entries are immutable: what ``get`` returns must not be changed, and stays valid (as the state
  at its RV) after later writes replace it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import orjson
from sortedcontainers import SortedList

from cacheproxy.kube.fieldpath import compile_field_path
from cacheproxy.kube.keys import object_key

__all__ = [
    "Entry",
    "IndexFunc",
    "Store",
    "Transform",
    "pick",
    "type_prefix",
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
        if self.metadata_only:
            return {
                "kind": obj.get("kind") or kind,
                "apiVersion": obj.get("apiVersion") or api_version,
                "metadata": obj.get("metadata", {}),
            }
        # Typed list items come without kind/apiVersion. Their place in the dict does not
        # matter: the store keeps them apart, as the entry's prefix (no copy of the object).
        if not obj.get("kind"):
            obj["kind"] = kind
        if not obj.get("apiVersion"):
            obj["apiVersion"] = api_version
        return obj


class Entry:
    """One stored object version. Immutable by contract.

    The object's compact JSON is kept in two parts: ``prefix``, its type
    (``{"kind":"Pod","apiVersion":"v1",``: one bytes object shared by every entry of a Store),
    and ``body``, everything after it up to the closing brace. ``raw`` is the whole object; a
    typed list item of a built-in kind (which carries no type) is ``{`` + ``body``. Lists and
    watch lines are assembled from these parts without slicing or copying any entry."""

    __slots__ = ("body", "key", "labels", "prefix", "values")

    def __init__(
        self,
        key: str,
        labels: tuple[str, ...],
        values: tuple[tuple[str, ...], ...],
        body: bytes,
        prefix: bytes,
    ) -> None:
        self.key = key
        self.labels = labels
        """Flattened ``(k1, v1, k2, v2, …)``, interned: cheaper than a dict per object."""
        self.values = values
        """Per configured index (in the store's order), the values this object is indexed under."""
        self.body = body
        self.prefix = prefix

    @property
    def raw(self) -> bytes:
        """The whole object's compact JSON (built on each call: keep it, do not compare by
        identity; ``body`` is the stored part)."""
        return self.prefix + self.body

    @property
    def size(self) -> int:
        """Bytes of the object's JSON (``len(raw)`` without building it)."""
        return len(self.prefix) + len(self.body)

    @property
    def rv(self) -> int:
        """The object's resourceVersion (parsed from the JSON: not kept twice, it is read rarely)."""
        value = self.object().get("metadata", {}).get("resourceVersion") or "0"
        return int(value) if str(value).isdigit() else 0

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

    def same_object(self, other: Entry) -> bool:
        """The same JSON (what a relist compares to tell changed objects from unchanged)."""
        return self.body == other.body and self.prefix == other.prefix

    def object(self) -> dict[str, Any]:
        """A fresh parsed copy of the object (callers may modify it)."""
        parsed: dict[str, Any] = orjson.loads(self.raw)
        return parsed

    def __repr__(self) -> str:
        return f"Entry({self.key!r}, {self.size} bytes)"


def pick(entries: Mapping[str, Entry], keys: Iterable[str]) -> list[Entry]:
    """The entries of ``keys`` found in ``entries`` (a store's, or a snapshot), in that order."""
    return list(filter(None, map(entries.get, keys)))


def type_prefix(kind: object, api_version: object) -> bytes:
    """``{"kind":…,"apiVersion":…,``: the part of an object's JSON an :class:`Entry` shares."""
    return b'{"kind":%s,"apiVersion":%s,' % (orjson.dumps(kind), orjson.dumps(api_version))


@dataclass(slots=True)
class _Index:
    name: str
    extract: Callable[[Mapping[str, Any]], tuple[str, ...]]
    by_value: dict[str, _Keys] = field(default_factory=dict)


def _labels_of(meta: Mapping[str, Any]) -> tuple[str, ...]:
    labels = meta.get("labels")
    if not labels:
        return ()
    flat: list[str] = []
    for k, v in labels.items():
        flat.append(k)
        flat.append(v)
    return tuple(flat)


class _Shared:
    """Equal small tuples shared between entries: pods of one ReplicaSet carry the same labels,
    and index values (nodes, owners, images) repeat across many objects. Bounded: past
    ``limit`` distinct tuples new ones are simply kept per entry."""

    def __init__(self, limit: int = 200_000) -> None:
        self._tuples: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._limit = limit

    def __call__(self, value: tuple[Any, ...]) -> tuple[Any, ...]:
        shared = self._tuples.get(value)
        if shared is not None:
            return shared
        if len(self._tuples) < self._limit:
            value = tuple(_intern(v) if isinstance(v, str) and len(v) < 64 else v for v in value)
            self._tuples[value] = value
        return value


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
        self._sorted: SortedList = SortedList()
        """Every key in key order: list pages and namespaces are ranges of it."""
        self._by_label: dict[str, dict[str, _Keys]] = {}
        self._indexes: list[_Index] = [_Index(p, compile_field_path(p)) for p in field_indexes]
        for name, func in (indexers or {}).items():
            self._indexes.append(_Index(name, _tuple_of(func)))
        self._index_pos = {ix.name: i for i, ix in enumerate(self._indexes)}
        self._shared = _Shared()
        self._ordered: dict[tuple[int, str, str], list[str]] = {}
        """Sorted copies of index sets that queries asked for, dropped when the set changes
        (a selected list is then O(result), with no sort per request)."""
        self._prefix = type_prefix(kind, api_version)
        self._rv = 0

    @property
    def resource_version(self) -> int:
        """The RV the store reflects (its last change, relist or bookmark)."""
        return self._rv

    @resource_version.setter
    def resource_version(self, rv: int) -> None:
        # Only for stores filled by hand (loadtest.pagewalk); goes once nothing sets it.
        self._rv = rv

    # ------------------------------------------------------------------ reads

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: str) -> Entry | None:
        return self._entries.get(key)

    def get_many(self, keys: Iterable[str]) -> list[Entry]:
        """The entries of ``keys`` that exist, in that order."""
        return pick(self._entries, keys)

    def entries(self) -> Iterator[Entry]:
        return iter(self._entries.values())

    def keys(self) -> Iterator[str]:
        return iter(self._entries)

    @property
    def index_names(self) -> list[str]:
        return [ix.name for ix in self._indexes]

    def namespace_keys(self, namespace: str) -> set[str]:
        """Keys in ``namespace`` (a range of the sorted keys)."""
        return set(self.sorted_keys(namespace=namespace))

    def count_keys(self, *, namespace: str | None = None, start: str = "") -> int:
        """How many keys ``sorted_keys`` would give (O(log n))."""
        keys = self._sorted
        if namespace:
            low = max(f"{namespace}/", start)
            return int(keys.bisect_left(f"{namespace}0") - keys.bisect_left(low))
        return int(len(keys) - keys.bisect_left(start))

    def sorted_keys(self, *, namespace: str | None = None, start: str = "") -> Iterator[str]:
        """Keys in key order, within ``namespace`` if given, from ``start`` (inclusive) on."""
        if namespace:
            low = max(f"{namespace}/", start)
            return iter(self._sorted.irange(low, f"{namespace}0", inclusive=(True, False)))
        return iter(self._sorted.irange(start) if start else self._sorted)

    def label_keys(self, key: str, value: str) -> AbstractSet[str]:
        """Keys whose label ``key`` is ``value`` (do not modify the set)."""
        return _as_set(self._by_label.get(key, {}).get(value))

    def label_values(self, key: str) -> Mapping[str, AbstractSet[str]]:
        """Every value of label ``key`` with its keys (for ``!=``, ``notin`` and exists)."""
        return _KeysByValue(self._by_label.get(key, {}))

    def label_keys_sorted(self, key: str, value: str) -> list[str]:
        """``label_keys`` in key order (kept until that set changes: do not modify)."""
        return self._in_order((0, key, value), self.label_keys(key, value))

    def index_keys_sorted(self, index: str, value: str) -> list[str]:
        """``index_keys`` in key order (kept until that set changes: do not modify)."""
        return self._in_order((1, index, value), self.index_keys(index, value))

    def _in_order(self, cache_key: tuple[int, str, str], keys: AbstractSet[str]) -> list[str]:
        ordered = self._ordered.get(cache_key)
        if ordered is None:
            ordered = self._ordered[cache_key] = sorted(keys)
        return ordered

    def index_keys(self, index: str, value: str) -> AbstractSet[str]:
        return _as_set(self._indexes[self._index_pos[index]].by_value.get(value))

    def index_values(self, index: str) -> Mapping[str, AbstractSet[str]]:
        return _KeysByValue(self._indexes[self._index_pos[index]].by_value)

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
        shared = self._shared
        values: tuple[Any, ...] = ()
        if self._indexes:
            values = shared(tuple([shared(ix.extract(obj)) for ix in self._indexes]))
        kind = obj.pop("kind", None)
        api_version = obj.pop("apiVersion", None)
        prefix = self._prefix
        if kind != self.kind or api_version != self.api_version:
            prefix = type_prefix(kind, api_version)  # not this store's type: kept as it came
        if not obj:
            prefix = prefix[:-1]  # nothing after the type: no comma before the closing brace
            body = b"}"
        else:
            # The rest of the object without its opening brace. orjson's buffer is
            # over-allocated (~1.8x by the allocator's count): this slice is an exact copy.
            body = orjson.dumps(obj)[1:]
        return Entry(key, shared(_labels_of(meta)), values, body, prefix)

    def put(self, entry: Entry, *, rv: int | None = None) -> Entry | None:
        """Insert or replace; returns the previous entry. ``rv``: the change's (the store's)."""
        prev = self._entries.get(entry.key)
        self._entries[entry.key] = entry
        if prev is not None:
            self._unindex(prev, entry)
        self._index(entry, prev)
        if rv is not None:
            self._rv = rv
        return prev

    def delete(self, key: str, *, rv: int | None = None) -> Entry | None:
        """Remove ``key``; returns what was stored. ``rv``: the deletion's (the store's)."""
        prev = self._entries.pop(key, None)
        if prev is not None:
            self._unindex(prev, None)
        if rv is not None:
            self._rv = rv
        return prev

    def advance(self, rv: int) -> None:
        """Progress without a change (a bookmark): the store is at ``rv`` if that is newer."""
        self._rv = max(self._rv, rv)

    def replace(self, entries: Iterable[Entry], resource_version: int) -> dict[str, Entry]:
        """Swap in a whole new state at once (a relist). Returns the previous state."""
        old = self._entries
        self._entries = {}
        self._by_label = {}
        self._ordered = {}
        for ix in self._indexes:
            ix.by_value = {}
        self._sorted = SortedList()
        for entry in entries:
            if entry.key in self._entries:
                self._unindex(self._entries[entry.key], None)
            self._entries[entry.key] = entry
            self._index(entry, None, sort=False)
        self._sorted = SortedList(self._entries)
        self._rv = resource_version
        return old

    # ------------------------------------------------------------------ internals

    def _index(self, entry: Entry, prev: Entry | None, *, sort: bool = True) -> None:
        key = entry.key
        if prev is None and sort:
            self._sorted.add(key)
        labels = entry.labels
        prev_labels = prev.labels if prev is not None else ()
        ordered = self._ordered
        if labels != prev_labels:
            for i in range(0, len(labels), 2):
                by_value = self._by_label.get(labels[i])
                if by_value is None:
                    by_value = self._by_label[labels[i]] = {}
                _add(by_value, labels[i + 1], key)
                if ordered:
                    ordered.pop((0, labels[i], labels[i + 1]), None)
        for i, ix in enumerate(self._indexes):
            old_values = prev.values[i] if prev is not None else ()
            if entry.values[i] == old_values:
                continue
            for value in entry.values[i]:
                _add(ix.by_value, value, key)
                if ordered:
                    ordered.pop((1, ix.name, value), None)

    def _unindex(self, prev: Entry, new: Entry | None) -> None:
        """Remove ``prev`` from the indexes where ``new`` (same key, or None) differs."""
        key = prev.key
        if new is None:
            self._sorted.discard(key)
        ordered = self._ordered
        if new is None or prev.labels != new.labels:
            for i in range(0, len(prev.labels), 2):
                by_value = self._by_label.get(prev.labels[i])
                if by_value is not None:
                    _discard(by_value, prev.labels[i + 1], key)
                    if not by_value:
                        del self._by_label[prev.labels[i]]
                if ordered:
                    ordered.pop((0, prev.labels[i], prev.labels[i + 1]), None)
        for i, ix in enumerate(self._indexes):
            if new is not None and new.values[i] == prev.values[i]:
                continue
            for value in prev.values[i]:
                _discard(ix.by_value, value, key)
                if ordered:
                    ordered.pop((1, ix.name, value), None)


_Keys = str | dict[str, None]
"""The keys under one index value. A dict used as an ordered set: CPython's sets are sparse
(~100 bytes per member at their usual fill), compact dicts ~30. A lone key is kept as the string
itself (a one-element container would cost ~200 bytes, and unique values are common)."""

_EMPTY: AbstractSet[str] = frozenset()


def _as_set(keys: _Keys | None) -> AbstractSet[str]:
    if keys is None:
        return _EMPTY
    return frozenset((keys,)) if isinstance(keys, str) else keys.keys()


def _add(index: dict[str, _Keys], value: str, key: str) -> None:
    keys = index.get(value)
    if keys is None:
        index[value] = key
    elif isinstance(keys, str):
        if keys != key:
            index[value] = {keys: None, key: None}
    else:
        keys[key] = None


def _discard(index: dict[str, _Keys], value: str, key: str) -> None:
    keys = index.get(value)
    if keys is None:
        return
    if isinstance(keys, str):
        if keys == key:
            del index[value]
        return
    keys.pop(key, None)
    if len(keys) == 1:
        index[value] = next(iter(keys))
    elif not keys:
        del index[value]


class _KeysByValue(Mapping[str, AbstractSet[str]]):
    """A read-only view of one index: value → keys."""

    __slots__ = ("_index",)

    def __init__(self, index: dict[str, _Keys]) -> None:
        self._index = index

    def __getitem__(self, value: str) -> AbstractSet[str]:
        return _as_set(self._index[value])

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def _tuple_of(func: IndexFunc) -> Callable[[Mapping[str, Any]], tuple[str, ...]]:
    def extract(obj: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(func(obj)))

    return extract
