"""A Store's indexes: label, field-path and custom, kept in step with every change.

:class:`Indexes` maps, for each label key, each value to the keys of the objects that carry it,
and likewise each configured field path (multi-valued, e.g. ``metadata.ownerReferences[*].uid``)
and each Python index function (:data:`IndexFunc`). It also keeps sorted copies of the key sets
that queries asked for, dropped when a set changes (a selected list is then O(result), with no
sort per request). An index answers exactly what a full scan answers.

It is maintained by its :class:`~cacheproxy.informer.store.Store` (the one writer), which hands
it each entry put and each entry replaced or removed; the store keeps the entries and their key
order. Memory matters here (docs/design.md §3): a value's keys are a string or a dict used as an ordered
set (:data:`_Keys`), and equal label and value tuples are shared between entries.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Protocol

from cacheproxy.kube.fieldpath import compile_field_path

__all__ = ["IndexFunc", "Indexed", "Indexes"]

IndexFunc = Callable[[Mapping[str, Any]], Iterable[str]]


class Indexed(Protocol):
    """What the indexes read of a stored entry (:class:`~cacheproxy.informer.store.Entry` is
    one): its key, its flattened labels and its values per index."""

    @property
    def key(self) -> str: ...

    @property
    def labels(self) -> tuple[str, ...]: ...

    @property
    def values(self) -> tuple[tuple[str, ...], ...]: ...


"""A library user's index: the values an object is indexed under."""

_intern = sys.intern
_flatten = chain.from_iterable


@dataclass(slots=True)
class _Index:
    name: str
    extract: Callable[[Mapping[str, Any]], tuple[str, ...]]
    by_value: dict[str, _Keys] = field(default_factory=dict)


class Indexes:
    """The label, field-path and custom indexes of one Store (see the module)."""

    def __init__(
        self, *, field_indexes: Sequence[str], indexers: Mapping[str, IndexFunc] | None
    ) -> None:
        self._by_label: dict[str, dict[str, _Keys]] = {}
        self._indexes: list[_Index] = [_Index(p, compile_field_path(p)) for p in field_indexes]
        for name, func in (indexers or {}).items():
            self._indexes.append(_Index(name, _tuple_of(func)))
        self._extracts = [ix.extract for ix in self._indexes]
        self.positions: Mapping[str, int] = {ix.name: i for i, ix in enumerate(self._indexes)}
        """Each index's place in an entry's ``values`` (read per object: no call in between)."""
        self._shared = _Shared()
        self._ordered: dict[tuple[int, str, str], list[str]] = {}
        """Sorted copies of index sets that queries asked for, dropped when the set changes."""

    # ------------------------------------------------------------------ what an object is under

    def record(
        self, obj: Mapping[str, Any], meta: Mapping[str, Any]
    ) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        """``(labels, values)`` of an object for its stored entry: its labels flattened, and
        per index (in this order) the values it is indexed under; equal tuples shared."""
        shared = self._shared
        values: tuple[Any, ...] = ()
        if self._extracts:
            values = shared(tuple([shared(extract(obj)) for extract in self._extracts]))
        labels = meta.get("labels")
        return (shared(tuple(_flatten(labels.items()))) if labels else ()), values

    # ------------------------------------------------------------------ reads

    @property
    def names(self) -> list[str]:
        return [ix.name for ix in self._indexes]

    def label_keys(self, key: str, value: str) -> AbstractSet[str]:
        return _as_set(self._by_label.get(key, {}).get(value))

    def label_values(self, key: str) -> Mapping[str, AbstractSet[str]]:
        return _KeysByValue(self._by_label.get(key, {}))

    def label_keys_sorted(self, key: str, value: str) -> list[str]:
        return self._in_order((0, key, value), self.label_keys(key, value))

    def index_keys_sorted(self, index: str, value: str) -> list[str]:
        return self._in_order((1, index, value), self.index_keys(index, value))

    def _in_order(self, cache_key: tuple[int, str, str], keys: AbstractSet[str]) -> list[str]:
        ordered = self._ordered.get(cache_key)
        if ordered is None:
            ordered = self._ordered[cache_key] = sorted(keys)
        return ordered

    def index_keys(self, index: str, value: str) -> AbstractSet[str]:
        return _as_set(self._indexes[self.positions[index]].by_value.get(value))

    def index_values(self, index: str) -> Mapping[str, AbstractSet[str]]:
        return _KeysByValue(self._indexes[self.positions[index]].by_value)

    # ------------------------------------------------------------------ writes

    def clear(self) -> None:
        self._by_label = {}
        self._ordered = {}
        for ix in self._indexes:
            ix.by_value = {}

    def index(self, entry: Indexed, prev: Indexed | None) -> None:
        """Add ``entry`` where ``prev`` (same key, or None), already unindexed, was not."""
        key = entry.key
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

    def index_all(self, entries: Iterable[Indexed]) -> None:
        """Add ``entries`` (of distinct keys) to cleared indexes: what :meth:`index` of each in
        turn (with no ``prev``) would do, in the same order, without a call per value."""
        assert not self._ordered, "index_all is for cleared indexes"
        by_label = self._by_label
        indexes = [(i, ix.by_value) for i, ix in enumerate(self._indexes)]
        for entry in entries:
            key = entry.key
            labels = entry.labels
            if labels:
                it = iter(labels)
                for label, value in zip(it, it, strict=True):
                    by_value = by_label.get(label)
                    if by_value is None:
                        by_value = by_label[label] = {}
                    keys = by_value.get(value)
                    if keys is None:
                        by_value[value] = key
                    elif isinstance(keys, str):
                        if keys != key:
                            by_value[value] = {keys: None, key: None}
                    else:
                        keys[key] = None
            if indexes:
                values = entry.values
                for i, index in indexes:
                    for value in values[i]:
                        _add(index, value, key)

    def unindex(self, prev: Indexed, new: Indexed | None) -> None:
        """Remove ``prev`` from the indexes where ``new`` (same key, or None) differs."""
        key = prev.key
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
