"""The indexed Store: the informer's cache of one collection, kept as compact JSON bytes.

Each :class:`Entry` is the object's JSON after the transform (by default without
``metadata.managedFields``) plus a small record: key, RV, labels and the values of the configured
indexes. No long-lived parsed dict is kept (docs/design.md §3: a parsed pod costs ~10 times its JSON).

Indexes: namespace (a range of the keys, which the store keeps in order), and labels (key → value
→ keys), each configured field path (multi-valued, e.g. ``metadata.ownerReferences[*].uid``) and
any Python index function, kept by :mod:`.indexes`. An index answers exactly what a full scan
answers.

Guarantees:
- one writer (the informer's processing loop); every mutation is synchronous, so a reader on the
  event loop never sees a half-applied event or a half-applied relist;
- the store's ``resource_version`` moves only with what it applies (a change at its RV, a relist,
  a bookmark): the writer hands each mutation its RV, never sets it apart from one;
- entries are immutable: what ``get`` returns must not be changed, and stays valid (as the state
  at its RV) after later writes replace it.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import orjson
from sortedcontainers import SortedList

from cacheproxy.informer.indexes import Indexes, IndexFunc
from cacheproxy.informer.packing import (
    Buffer,
    Packer,
    Storage,
    body_size,
    member_bodies,
    member_runs,
    share,
)
from cacheproxy.kube.keys import object_key

__all__ = [
    "Entry",
    "PackedEntry",
    "Store",
    "Transform",
    "Unpackers",
    "bodies",
    "pick",
    "type_prefix",
]

_intern = sys.intern


@dataclass(frozen=True)
class Transform:
    """What is kept of each object (docs/design.md §5 ``transform``)."""

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

    __slots__ = ("_parsed", "body", "key", "labels", "prefix", "values")

    packer: Packer | None = None
    """What packed the body (:class:`PackedEntry`); None: ``body`` is the bytes themselves."""

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
        self._parsed: dict[str, Any] | None = None

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
        if self is other:
            return True
        if self.prefix != other.prefix:
            return False
        if (
            isinstance(self, PackedEntry)
            and isinstance(other, PackedEntry)
            and self.packer is other.packer
            and self.packed[0] == other.packed[0] == 1
        ):
            return self.packed == other.packed  # each alone: packing is deterministic
        return self.body == other.body

    def object(self) -> dict[str, Any]:
        """A fresh parsed copy of the object (callers may modify it)."""
        parsed: dict[str, Any] = orjson.loads(self.raw)
        return parsed

    @property
    def parsed(self) -> dict[str, Any]:
        """The object, parsed on first use and kept while this entry lives (a later version of
        the object is a new entry). Shared by every reader: read it, never modify it — as with
        client-go's cache, a change belongs in a copy (:meth:`object`).

        Kept by the entry, so only objects someone read cost their parsed size (about ten times
        their JSON); the daemon never asks."""
        parsed = self._parsed
        if parsed is None:
            parsed = self._parsed = orjson.loads(self.raw)
        return parsed

    def __repr__(self) -> str:
        return f"Entry({self.key!r}, {self.size} bytes)"


class PackedEntry(Entry):
    """An entry whose body is kept compressed (:mod:`.packing`), at place ``member`` of the
    block ``packed`` (which other entries may share): ``body`` decompresses it on each read, so
    callers reading many bodies use :func:`bodies`."""

    __slots__ = ("member", "packed", "packer")

    packer: Packer

    def __init__(
        self,
        key: str,
        labels: tuple[str, ...],
        values: tuple[tuple[str, ...], ...],
        packed: bytes,
        prefix: bytes,
        packer: Packer,
        member: int = 0,
    ) -> None:
        self.key = key
        self.labels = labels
        self.values = values
        self.prefix = prefix
        self.packed = packed
        self.packer = packer
        self.member = member
        self._parsed = None

    @property
    def body(self) -> bytes:  # type: ignore[override]  # the slot's value, made on each read
        return self.packer.unpack(self.packed, self.member)

    @property
    def size(self) -> int:
        return len(self.prefix) + body_size(self.packed, self.member)

    @classmethod
    def of(cls, entry: Entry, packer: Packer) -> PackedEntry:
        """``entry`` packed by ``packer``, alone."""
        return cls(
            entry.key, entry.labels, entry.values, packer.pack(entry.body), entry.prefix, packer
        )


def pack(entries: list[Entry], packer: Packer) -> None:
    """Pack, in place, the ``entries`` that ``packer`` did not pack: neighbours by key together,
    in blocks of ``block_objects``."""
    todo = [i for i, entry in enumerate(entries) if entry.packer is not packer]
    todo.sort(key=lambda i: entries[i].key)
    size = packer.storage.block_objects
    for start in range(0, len(todo), size):
        run = todo[start : start + size]
        block = packer.pack_block([entries[i].body for i in run])
        for member, i in enumerate(run):
            e = entries[i]
            entries[i] = PackedEntry(e.key, e.labels, e.values, block, e.prefix, packer, member)


def keep_unchanged(entries: list[Entry], old: Mapping[str, Entry]) -> None:
    """Put back, in place, the entry of ``old`` for each of ``entries`` that holds the same object:
    a relist of a packed store keeps what was stored (and its block), not a new packing of it."""
    pairs = [
        (i, prev)
        for i, entry in enumerate(entries)
        if (prev := old.get(entry.key)) is not None
        and prev is not entry
        and prev.prefix == entry.prefix
    ]
    for start in range(0, len(pairs), _COMPARED_AT_ONCE):  # a few MB of plain bodies at a time
        some = pairs[start : start + _COMPARED_AT_ONCE]
        new = bodies([entries[i] for i, _ in some])
        was = bodies([prev for _, prev in some])
        for (i, prev), body, stored in zip(some, new, was, strict=True):
            if body == stored:
                entries[i] = prev


_COMPARED_AT_ONCE = 1024


_BODY = operator.attrgetter("body")
_PACKER = operator.attrgetter("packer")
_PACKED = operator.attrgetter("packed")
_MEMBER = operator.attrgetter("member")


Unpackers = dict[Packer, Callable[[bytes], bytes]]
"""Decompression contexts of one thread other than the event loop's, by packer."""


def bodies(
    entries: Sequence[Entry], *, off_loop: Unpackers | None = None, joined: bool = False
) -> list[Buffer]:
    """The bodies of ``entries`` in order, without a copy of a plain one; packed ones
    decompressed together (each block once when one packer packed them all). ``off_loop``: for
    a thread other than the event loop's, its own contexts (made here on first need, kept there
    for its next calls). ``joined``: the bodies of objects packed one after the other in a
    block, asked for one after the other, come as one piece, joined by
    :data:`~cacheproxy.informer.packing.JOINER` (what a list of a built-in kind writes between
    its items' bodies, so fewer pieces to write)."""
    packers = set(map(_PACKER, entries))
    if packers == {None} or not packers:
        return list(map(_BODY, entries))
    if len(packers) == 1:  # all packed, by one packer
        (packer,) = packers
        assert isinstance(packer, Packer)
        read = member_runs if joined else member_bodies
        unpack = _unpacker(packer, off_loop)
        return read(unpack, list(map(_PACKED, entries)), list(map(_MEMBER, entries)))
    return [  # some packed, some not: one at a time (only while a store is being packed)
        member_bodies(_unpacker(e.packer, off_loop), [e.packed], [e.member])[0]
        if isinstance(e, PackedEntry)
        else e.body
        for e in entries
    ]


def _unpacker(packer: Packer, off_loop: Unpackers | None) -> Callable[[bytes], bytes]:
    if off_loop is None:
        return packer.unpack_block
    unpack = off_loop.get(packer)
    if unpack is None:
        unpack = off_loop[packer] = packer.block_unpacker()
    return unpack


def _packed_len(entry: Entry | None) -> int:
    return share(entry.packed) if isinstance(entry, PackedEntry) else 0


def pick(entries: Mapping[str, Entry], keys: Iterable[str]) -> list[Entry]:
    """The entries of ``keys`` found in ``entries`` (a store's, or a snapshot), in that order."""
    return list(filter(None, map(entries.get, keys)))


def type_prefix(kind: object, api_version: object) -> bytes:
    """``{"kind":…,"apiVersion":…,``: the part of an object's JSON an :class:`Entry` shares."""
    return b'{"kind":%s,"apiVersion":%s,' % (orjson.dumps(kind), orjson.dumps(api_version))


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
        storage: Storage | None = None,
    ) -> None:
        self.kind = kind
        self.api_version = api_version
        self.transform = transform or Transform()
        self._entries: dict[str, Entry] = {}
        self._sorted: SortedList = SortedList()
        """Every key in key order: list pages and namespaces are ranges of it."""
        self._indexes = Indexes(field_indexes=field_indexes, indexers=indexers)
        self._index_pos = self._indexes.positions
        self._prefix = type_prefix(kind, api_version)
        self._rv = 0
        self.storage = storage or Storage()
        self.packer: Packer | None = Packer(self.storage) if self.storage.compressed else None
        """Set while objects are (or will be) packed; :attr:`Packer.ready` once trained."""
        self._packed_bytes = 0

    @property
    def resource_version(self) -> int:
        """The RV the store reflects (its last change, relist or bookmark)."""
        return self._rv

    @resource_version.setter
    def resource_version(self, rv: int) -> None:
        # Only for stores filled by hand (loadtest.scenarios.pagewalk); goes once nothing sets it.
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
    def packed_bytes(self) -> int:
        """Bytes of the packed bodies held (0 for a plain store)."""
        return self._packed_bytes

    @property
    def index_names(self) -> list[str]:
        return self._indexes.names

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
        return self._indexes.label_keys(key, value)

    def label_values(self, key: str) -> Mapping[str, AbstractSet[str]]:
        """Every value of label ``key`` with its keys (for ``!=``, ``notin`` and exists)."""
        return self._indexes.label_values(key)

    def label_keys_sorted(self, key: str, value: str) -> list[str]:
        """``label_keys`` in key order (kept until that set changes: do not modify)."""
        return self._indexes.label_keys_sorted(key, value)

    def index_keys_sorted(self, index: str, value: str) -> list[str]:
        """``index_keys`` in key order (kept until that set changes: do not modify)."""
        return self._indexes.index_keys_sorted(index, value)

    def index_keys(self, index: str, value: str) -> AbstractSet[str]:
        return self._indexes.index_keys(index, value)

    def index_values(self, index: str) -> Mapping[str, AbstractSet[str]]:
        return self._indexes.index_values(index)

    def values_of(self, entry: Entry, index: str) -> tuple[str, ...]:
        return entry.values[self._index_pos[index]]

    def has_index(self, index: str) -> bool:
        return index in self._index_pos

    # ------------------------------------------------------------------ writes

    def make_entry(self, obj: dict[str, Any]) -> Entry:
        """Transform, index and encode a freshly parsed object (which this may modify)."""
        store_kind, store_api_version = self.kind, self.api_version
        obj = self.transform.apply(obj, kind=store_kind, api_version=store_api_version)
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace")
        key = object_key(_intern(namespace) if namespace else None, meta.get("name") or "")
        labels, values = self._indexes.record(obj, meta)
        kind = obj.pop("kind", None)
        api_version = obj.pop("apiVersion", None)
        prefix = self._prefix
        if kind != store_kind or api_version != store_api_version:
            prefix = type_prefix(kind, api_version)  # not this store's type: kept as it came
        if not obj:
            prefix = prefix[:-1]  # nothing after the type: no comma before the closing brace
            body = b"}"
        else:
            # The rest of the object without its opening brace. orjson's buffer is
            # over-allocated (~1.8x by the allocator's count): this slice is an exact copy.
            body = orjson.dumps(obj)[1:]
        packer = self.packer
        if packer is not None and packer.ready:
            return PackedEntry(key, labels, values, packer.pack(body), prefix, packer)
        return Entry(key, labels, values, body, prefix)

    def _train(self, packer: Packer) -> None:
        """Train ``packer`` on what it sampled; once trained, pack every stored entry."""
        if not packer.train():
            return
        entries = self._entries
        stored = list(entries.values())
        pack(stored, packer)
        for entry in stored:
            entries[entry.key] = entry
        self._packed_bytes = sum(map(_packed_len, stored))

    def put(self, entry: Entry, *, rv: int | None = None) -> Entry | None:
        """Insert or replace; returns the previous entry. ``rv``: the change's (the store's)."""
        prev = self._entries.get(entry.key)
        packer = self.packer
        if packer is not None:
            if entry.packer is not packer:
                if not packer.ready and packer.sample(entry.body):  # grown by watch events
                    self._train(packer)
                    prev = self._entries.get(entry.key)  # packed now
                if packer.ready:  # made before the packer was trained
                    entry = PackedEntry.of(entry, packer)
            self._packed_bytes += _packed_len(entry) - _packed_len(prev)
        self._entries[entry.key] = entry
        if prev is None:
            self._sorted.add(entry.key)
        else:
            self._indexes.unindex(prev, entry)
        self._indexes.index(entry, prev)
        if rv is not None:
            self._rv = rv
        return prev

    def delete(self, key: str, *, rv: int | None = None) -> Entry | None:
        """Remove ``key``; returns what was stored. ``rv``: the deletion's (the store's)."""
        prev = self._entries.pop(key, None)
        if prev is not None:
            if self.packer is not None:
                self._packed_bytes -= _packed_len(prev)
            self._sorted.discard(key)
            self._indexes.unindex(prev, None)
        if rv is not None:
            self._rv = rv
        return prev

    def advance(self, rv: int) -> None:
        """Progress without a change (a bookmark): the store is at ``rv`` if that is newer."""
        self._rv = max(self._rv, rv)

    def replace(self, entries: Iterable[Entry], resource_version: int) -> dict[str, Entry]:
        """Swap in a whole new state at once (a relist). Returns the previous state. A packing
        store packs the entries of a list given in place (the list then holds the stored ones)."""
        old = self._entries
        entries = entries if isinstance(entries, list) else list(entries)
        packer = self.packer
        if packer is not None:
            if not packer.ready:  # the end of a list: train on what it gave
                packer.forget_samples()
                for entry in entries:
                    if packer.sample(entry.body):
                        break
                packer.train()
            if packer.ready:  # packed in the caller's list too: no one keeps the plain ones
                if old:
                    keep_unchanged(entries, old)
                pack(entries, packer)
        indexes = self._indexes
        indexes.clear()
        self._entries = {entry.key: entry for entry in entries}
        if len(self._entries) == len(entries):
            indexes.index_all(entries)
        else:  # a key listed twice: the last one counts, indexed as if put in turn
            self._entries = {}
            for entry in entries:
                if entry.key in self._entries:
                    indexes.unindex(self._entries[entry.key], None)
                self._entries[entry.key] = entry
                indexes.index(entry, None)
        self._sorted = SortedList(self._entries)
        self._rv = resource_version
        if packer is not None:
            self._packed_bytes = sum(map(_packed_len, self._entries.values()))
        return old
