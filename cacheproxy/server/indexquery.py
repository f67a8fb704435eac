"""Questions asked of a served resource's field indexes, in plain terms: how many distinct values
an index holds and which are the most common, how many objects have each value, and which
objects have a value (the HTTP-by-index use case of cacheproxy's own API, :mod:`.ownapi`).

Answers come from the index (docs/design.md §3: an index answers exactly what a full scan answers), never
from parsing objects: counts and top values cost O(distinct values), a value's objects O(their
number) in key order. They are read at once, between two events (the store is never awaited on).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from cacheproxy.server.resource import ServedResource

__all__ = ["IndexSummary", "ObjectRef", "ValueCount", "objects_with", "summarize", "value_counts"]


@dataclass(frozen=True, slots=True)
class ValueCount:
    value: str
    count: int
    """Objects that have this value (an object with several values counts under each)."""


@dataclass(frozen=True, slots=True)
class IndexSummary:
    path: str
    cardinality: int
    """Distinct values the index holds now."""
    top: tuple[ValueCount, ...]
    """The most common values, most objects first (ties in value order)."""


@dataclass(frozen=True, slots=True)
class ObjectRef:
    namespace: str | None
    """None for cluster-scoped objects."""
    name: str


def _by_count(item: ValueCount) -> tuple[int, str]:
    return (-item.count, item.value)


def value_counts(res: ServedResource, index: str) -> list[ValueCount]:
    """Each value ``index`` holds with how many objects have it, most objects first."""
    by_value = res.store.index_values(index)
    return sorted((ValueCount(v, len(keys)) for v, keys in by_value.items()), key=_by_count)


def summarize(res: ServedResource, index: str, *, top: int) -> IndexSummary:
    """``index``'s cardinality and its ``top`` most common values."""
    by_value = res.store.index_values(index)
    counts = (ValueCount(v, len(keys)) for v, keys in by_value.items())
    return IndexSummary(
        path=index,
        cardinality=len(by_value),
        top=tuple(heapq.nsmallest(top, counts, key=_by_count)) if top else (),
    )


def objects_with(
    res: ServedResource, index: str, values: list[str], *, namespace: str | None = None
) -> list[ObjectRef]:
    """The objects having any of ``values`` in ``index`` (in ``namespace`` only, if given), in
    key order, each once."""
    store = res.store
    keys: set[str] = set()
    for value in values:
        keys |= store.index_keys(index, value)
    if namespace is not None:
        prefix = f"{namespace}/"
        keys = {k for k in keys if k.startswith(prefix)}
    namespaced = res.rtype.namespaced
    out = []
    for key in sorted(keys):
        if namespaced:
            ns, _, name = key.partition("/")
            out.append(ObjectRef(ns, name))
        else:
            out.append(ObjectRef(None, key))
    return out
