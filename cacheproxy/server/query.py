"""Selecting objects from a Store: namespace, label, field and index selectors, from the indexes.

The indexes narrow the candidates (namespace, label ``=``/``in``/exists, ``metadata.name``, and
any configured index path for ``fieldSelector`` and ``indexSelector``); every candidate is then
checked against the whole query, so the answer is exactly what a full scan would give
(docs/design.md §3: "an index answers exactly what a full scan answers").

Field values of an object: the API server's per-kind fields (``kube.fields.object_fields``) and,
for configured index paths, the (possibly several) values the index holds; a field selector on a
multi-valued path matches ``=`` when any value is equal and ``!=`` when none is.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from cacheproxy.errors import ApiError
from cacheproxy.informer.store import Entry, Store
from cacheproxy.kube import status
from cacheproxy.kube.fields import (
    FieldSelector,
    object_fields,
    supported_fields,
    validate_field_selector,
)
from cacheproxy.kube.labels import LabelSelector, Operator, parse_label_selector
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.sharding import ShardSelector, fnv1a64

__all__ = [
    "EntryView",
    "Query",
    "matches",
    "matches_view",
    "parse_index_selector",
    "select_keys",
    "uid_of",
]

_POSITIVE = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
_NEGATIVE = (Operator.NOT_EQUALS, Operator.NOT_IN, Operator.DOES_NOT_EXIST)


@dataclass(frozen=True, slots=True)
class Query:
    namespace: str | None = None
    labels: LabelSelector = LabelSelector.EVERYTHING
    fields: FieldSelector = FieldSelector.EVERYTHING
    index: LabelSelector = LabelSelector.EVERYTHING
    """``indexSelector=``: the label-selector grammar over configured index paths."""
    namespaces: frozenset[str] | None = None
    """Only objects in these namespaces (the namespace-filtered authorization mode)."""
    shard: ShardSelector | None = None
    """``shardSelector=`` (KEP-5866): only objects whose uid or namespace hashes into its ranges."""

    @property
    def selective(self) -> bool:
        """Any selector at all (``remainingItemCount`` is only given without)."""
        return not (
            self.labels.empty
            and self.fields.empty
            and self.index.empty
            and self.namespaces is None
            and self.shard is None
        )


def parse_index_selector(text: str, indexes: Iterable[str]) -> LabelSelector:
    """``spec.nodeName in (n1,n2),status.phase!=Running`` over configured index paths; a path
    that is not an index → 400 naming the indexes."""
    selector = parse_label_selector(text, validate=False)
    known = set(indexes)
    for req in selector.requirements:
        if req.key not in known:
            listed = ", ".join(sorted(known)) or "none are configured"
            raise status.bad_request(
                f'indexSelector: "{req.key}" is not an index of this resource (indexes: {listed})'
            )
        if req.operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
            raise status.bad_request("indexSelector: only =, ==, !=, in, notin, exists and !")
    return selector


def validate_fields(
    rtype: ResourceType, selector: FieldSelector, indexes: Iterable[str]
) -> FieldSelector:
    """The API server's field check, extended by the configured index paths; a 400 keeps the API
    server's wording and names every field this resource supports here."""
    index_list = sorted(indexes)
    try:
        return validate_field_selector(rtype, selector, extra_fields=index_list)
    except ApiError as err:
        supported = ", ".join(dict.fromkeys([*supported_fields(rtype), *index_list]))
        raise status.bad_request(f"{err.message} (supported: {supported})") from None


class _Narrowing:
    """What one requirement leaves: a membership test, and on demand the same keys in order."""

    __slots__ = ("_ordered", "keys", "size")

    def __init__(self, keys: Container[str], size: int, ordered: Callable[[], list[str]]) -> None:
        self.keys = keys
        self.size = size
        self._ordered = ordered

    def ordered(self) -> list[str]:
        return self._ordered()


class _InNamespace(Container[str]):
    """The keys of one namespace, as a membership test on the key (no set is built)."""

    __slots__ = ("_prefix",)

    def __init__(self, namespace: str) -> None:
        self._prefix = f"{namespace}/"

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.startswith(self._prefix)


def _of_set(keys: AbstractSet[str]) -> _Narrowing:
    return _Narrowing(keys, len(keys), lambda: sorted(keys))


def _union(sets: Iterable[AbstractSet[str]]) -> _Narrowing:
    return _of_set(set().union(*sets))


def select_keys(store: Store, query: Query, index_paths: set[str]) -> tuple[list[str] | None, bool]:
    """Candidate keys from the indexes, in key order (None when no index narrows the query:
    scan all), and whether they are exactly the answer — every requirement was resolved by an
    index, so no object needs checking (a 5 % label list then costs its keys, not a match per
    object). The smallest narrowing set is walked in order (an index set's order is kept by the
    store between changes) and the others are membership tests: no sort per request."""
    narrowing: list[_Narrowing] = []
    exact = True

    def namespace(ns: str) -> _Narrowing:
        return _Narrowing(
            _InNamespace(ns),
            store.count_keys(namespace=ns),
            lambda: list(store.sorted_keys(namespace=ns)),
        )

    def any_of(
        keys_of: Callable[[str, str], AbstractSet[str]],
        in_order: Callable[[str, str], list[str]],
        name: str,
        values: Iterable[str],
    ) -> _Narrowing:
        """The keys under any of ``values`` of one label or index (one value: kept in order)."""
        values = tuple(values)
        if len(values) != 1:
            return _union(keys_of(name, v) for v in values)
        keys = keys_of(name, values[0])
        return _Narrowing(keys, len(keys), lambda: in_order(name, values[0]))

    def by_selector(
        selector: LabelSelector,
        keys_of: Callable[[str, str], AbstractSet[str]],
        in_order: Callable[[str, str], list[str]],
        values_of: Callable[[str], Mapping[str, AbstractSet[str]]],
    ) -> bool:
        """Narrowings for a label or index selector's ``=``, ``in`` and exists requirements (from
        the store's label or index sets); False when another one leaves a check per object."""
        resolved = True
        for req in selector.requirements:
            if req.operator in _POSITIVE:
                narrowing.append(any_of(keys_of, in_order, req.key, req.values))
            elif req.operator is Operator.EXISTS:
                narrowing.append(_union(values_of(req.key).values()))
            else:
                resolved = False
        return resolved

    if query.namespace:
        narrowing.append(namespace(query.namespace))
    if query.namespaces is not None:
        # Namespaces in order, each a range of the sorted keys: their concatenation is sorted.
        chosen = sorted(query.namespaces)
        keys = [k for ns in chosen for k in store.sorted_keys(namespace=ns)]
        narrowing.append(_Narrowing(frozenset(keys), len(keys), lambda: keys))
    if not by_selector(query.labels, store.label_keys, store.label_keys_sorted, store.label_values):
        exact = False
    for freq in query.fields.requirements:
        if freq.operator == "!=":
            exact = False
        elif freq.field == "metadata.namespace" and freq.value:
            narrowing.append(namespace(freq.value))
        elif freq.field == "metadata.name" and query.namespace:
            key = f"{query.namespace}/{freq.value}"
            narrowing.append(_of_set(frozenset({key} if key in store else ())))
        elif freq.field == "metadata.name" and freq.value in store:
            narrowing.append(_of_set(frozenset({freq.value})))
        elif freq.field in index_paths and freq.value:
            # ``=""`` also matches objects without the field (an absent field reads as ""),
            # which the index does not hold: those are found by the scan.
            narrowing.append(
                any_of(store.index_keys, store.index_keys_sorted, freq.field, (freq.value,))
            )
        else:
            exact = False
    if not by_selector(query.index, store.index_keys, store.index_keys_sorted, store.index_values):
        exact = False
    if query.shard is not None:  # no index holds hashes: a check per candidate
        exact = False
    if not narrowing:
        return None, False
    smallest = min(narrowing, key=lambda n: n.size)
    if smallest.size == 0:
        return [], exact
    ordered = smallest.ordered()
    others = [n.keys for n in narrowing if n is not smallest]
    if others:
        ordered = [k for k in ordered if all(k in keys for keys in others)]
    return ordered, exact


class EntryView:
    """What queries read of an entry — its labels and field values — worked out once, and
    parsed from its JSON only when a query needs a field no index holds. The watch fan-out
    shares one view per event among all watchers."""

    __slots__ = ("_fields", "_labels", "_rtype", "_store", "_uid_hash", "entry")

    def __init__(self, entry: Entry, rtype: ResourceType, store: Store) -> None:
        self.entry = entry
        self._rtype = rtype
        self._store = store
        self._labels: Mapping[str, str] | None = None
        self._fields: dict[str, str] | None = None
        self._uid_hash: int | None = None

    def in_shard(self, shard: ShardSelector) -> bool:
        """Whether the entry is in ``shard`` (its uid hashed at most once per view)."""
        if not shard.by_uid:
            return shard.matches(uid="", namespace=self.entry.namespace)
        if self._uid_hash is None:
            self._uid_hash = fnv1a64(uid_of(self.entry))
        return shard.contains(self._uid_hash)

    @property
    def labels(self) -> Mapping[str, str]:
        if self._labels is None:
            self._labels = self.entry.label_map()
        return self._labels

    def index_values(self, index: str) -> tuple[str, ...]:
        """The values the index holds for this entry (none when the field is absent)."""
        return self._store.values_of(self.entry, index)

    def values(self, field: str) -> tuple[str, ...]:
        """A field's values as field selectors compare them (absent reads as "")."""
        entry = self.entry
        if self._store.has_index(field):
            # As in the API server's field set, an absent field reads as the empty string.
            return self._store.values_of(entry, field) or ("",)
        if field == "metadata.name":
            return (entry.name,)
        if field == "metadata.namespace":
            return (entry.namespace,)
        if self._fields is None:
            self._fields = object_fields(self._rtype, entry.object())
        return (self._fields.get(field, ""),)


_UID = b'"uid":"'
_METADATA = b'"metadata":{'


def uid_of(entry: Entry) -> str:
    """``metadata.uid`` of an entry ("" when absent), read from its bytes without parsing them
    when the API server's order puts it there: in a typed object's metadata only strings (name,
    generateName, namespace, selfLink) come before ``uid``, so the first ``"uid":"`` after
    ``"metadata":{`` with no brace or bracket in between is metadata's own (a quote inside a string
    is escaped, so the pattern cannot start inside one). Anything else — a custom resource's
    alphabetical metadata, where labels and ownerReferences come first — is parsed."""
    body = entry.body
    start = body.find(_METADATA)
    if start >= 0:
        start += len(_METADATA)
        at = body.find(_UID, start)
        if at >= 0:
            between = body[start:at]
            if not (b"{" in between or b"[" in between or b"}" in between):
                value = at + len(_UID)
                end = body.find(b'"', value)
                raw = body[value:end]
                if b"\\" not in raw:
                    return raw.decode()
    meta = entry.object().get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) else ""


def matches(entry: Entry, query: Query, rtype: ResourceType, store: Store) -> bool:
    """The whole query against one entry (the exact check after the index narrowed)."""
    return matches_view(EntryView(entry, rtype, store), query)


def matches_view(view: EntryView, query: Query) -> bool:
    """:func:`matches` over a view that may be shared between queries."""
    entry = view.entry
    if query.namespace and entry.namespace != query.namespace:
        return False
    if query.namespaces is not None and entry.namespace not in query.namespaces:
        return False
    if query.shard is not None and not view.in_shard(query.shard):
        return False
    if not query.labels.empty and not query.labels.matches(view.labels):
        return False
    for freq in query.fields.requirements:
        values = view.values(freq.field)
        if (freq.value in values) == (freq.operator == "!="):
            return False
    for req in query.index.requirements:
        values = view.index_values(req.key)
        # Multi-valued: a positive requirement holds for some value, a negative one for all.
        check = all if req.operator in _NEGATIVE else any
        if not check(req.matches({req.key: v}) for v in values):
            return False
    return True
