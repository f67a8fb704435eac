"""Compressed storage: a packed store holds and gives back exactly what a plain store does."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cacheproxy.informer import Storage, Store
from cacheproxy.informer.persistence import SnapshotView, read_snapshot, write_snapshot
from cacheproxy.informer.store import PackedEntry, bodies
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.resources import builtin as builtin_type
from cacheproxy.server.resource import ServedList
from cacheproxy.sim.workload import make_pod

WIDGETS = ResourceType("example.com", "v1", "widgets", "Widget", namespaced=True)
SMALL = Storage(compressed=True, training_bytes=64 << 10, min_training_objects=16)
"""Trains after ~30 demo pods: small enough for tests, the same code as the default."""


def _pods(count: int, *, seed: int = 1, rv: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        pod = make_pod(rng, namespace=f"ns-{i % 3}", app=f"app-{i % 4}", node=f"node-{i % 5}")
        pod["metadata"]["name"] = f"pod-{i}"
        pod["metadata"]["resourceVersion"] = str(rv + i)
        pods.append(pod)
    return pods


def _store(storage: Storage | None = None) -> Store:
    return Store(kind="Pod", api_version="v1", field_indexes=("spec.nodeName",), storage=storage)


def _filled(storage: Storage | None, pods: list[dict[str, Any]]) -> Store:
    store = _store(storage)
    store.replace([store.make_entry(orjson.loads(orjson.dumps(p))) for p in pods], 100)
    return store


def test_the_first_list_trains_the_dictionary_and_every_object_is_packed() -> None:
    plain, packed = _filled(None, _pods(200)), _filled(SMALL, _pods(200))
    assert packed.packer is not None and packed.packer.ready
    assert all(isinstance(e, PackedEntry) for e in packed.entries())
    assert not any(isinstance(e, PackedEntry) for e in plain.entries())
    for entry in plain.entries():
        mine = packed.get(entry.key)
        assert mine is not None
        assert mine.raw == entry.raw and mine.body == entry.body and mine.size == entry.size
        assert mine.labels == entry.labels and mine.values == entry.values
    stored = sum(len(e.packed) for e in packed.entries() if isinstance(e, PackedEntry))
    assert stored * 4 < sum(e.size for e in plain.entries()), "packed well below the JSON"


def test_a_relist_packs_the_list_it_was_given_so_no_plain_copy_outlives_it() -> None:
    store = _store(SMALL)
    entries = [store.make_entry(p) for p in _pods(100)]
    store.replace(entries, 1)
    assert all(isinstance(e, PackedEntry) for e in entries)
    assert all(store.get(e.key) is e for e in entries)


def test_objects_made_after_training_are_packed_as_they_are_made() -> None:
    store = _filled(SMALL, _pods(100))
    [pod] = _pods(1, seed=9)
    entry = store.make_entry(pod)
    assert isinstance(entry, PackedEntry)
    assert orjson.loads(entry.raw)["metadata"]["name"] == "pod-0"
    assert entry.same_object(store.make_entry(orjson.loads(orjson.dumps(pod))))


def test_a_collection_too_small_to_train_on_stays_plain_until_it_grows() -> None:
    store = _filled(SMALL, _pods(5))
    assert store.packer is not None and not store.packer.ready
    assert not any(isinstance(e, PackedEntry) for e in store.entries())
    for pod in _pods(120, seed=2, rv=1000):  # watch events, one at a time
        store.put(store.make_entry(pod))
    assert store.packer.ready
    assert all(isinstance(e, PackedEntry) for e in store.entries())
    assert len(store) == 120  # pod-0..pod-4 replaced by their later versions


def test_bodies_of_a_packed_store_are_the_plain_stores_in_order() -> None:
    pods = _pods(300)
    plain, packed = _filled(None, pods), _filled(SMALL, pods)
    keys = sorted(plain.keys())
    for count in (0, 1, 10, 300):  # below and above the batch threshold
        want = [bytes(b) for b in bodies(plain.get_many(keys[:count]))]
        assert [bytes(b) for b in bodies(packed.get_many(keys[:count]))] == want
        off_loop = [bytes(b) for b in bodies(packed.get_many(keys[:count]), off_loop={})]
        assert off_loop == want
    # Some packed, some not (a store being packed): each read as it is kept.
    mixed = [(packed if i % 2 else plain).get(key) for i, key in enumerate(keys) if i < 100]
    want = [bytes(b) for b in bodies(plain.get_many(keys[:100]))]
    assert [bytes(b) for b in bodies([e for e in mixed if e is not None])] == want
    assert [bytes(b) for b in bodies([e for e in mixed if e is not None], off_loop={})] == want


def test_bodies_are_read_in_another_thread_while_the_loop_reads_them() -> None:
    pods = _pods(200)
    plain, packed = _filled(None, pods), _filled(SMALL, pods)
    entries = list(packed.entries())
    want = [e.body for e in (plain.get(x.key) for x in entries) if e is not None]
    seen: list[list[bytes]] = []
    thread = threading.Thread(
        target=lambda: seen.append([bytes(b) for b in bodies(entries, off_loop={})])
    )
    thread.start()
    for _ in range(20):
        assert [bytes(b) for b in bodies(entries)] == want
    thread.join()
    assert seen == [want]


def test_a_snapshot_of_a_packed_store_restores_into_either_kind_of_store(tmp_path: Path) -> None:
    pods = _pods(150)
    packed = _filled(SMALL, pods)
    path = tmp_path / "pods.snapshot"
    view = SnapshotView.of(packed, identity={"resource": "pods"})
    write_snapshot(path, view)
    for storage in (None, SMALL):
        store = _store(storage)
        entries, rv = read_snapshot(path, store=store, identity={"resource": "pods"})
        store.replace(entries, rv)
        assert {e.key: e.raw for e in store.entries()} == {e.key: e.raw for e in packed.entries()}
        assert all(isinstance(e, PackedEntry) for e in store.entries()) == (storage is not None)


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 60), st.integers(0, 10_000)),
        st.tuples(st.just("delete"), st.integers(0, 60)),
        st.tuples(st.just("relist"), st.integers(0, 80), st.integers(0, 10_000)),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(ops=_ops)
@example(ops=[("relist", 80, 1), ("put", 3, 7), ("delete", 4), ("relist", 70, 2), ("put", 90, 3)])
def test_a_packed_store_answers_what_a_plain_store_answers(ops: list[tuple[Any, ...]]) -> None:
    """Any sequence of changes and relists: same objects, same bytes, same index answers."""
    plain, packed = _store(), _store(SMALL)
    for op in ops:
        if op[0] == "put":
            [pod] = _pods(1, seed=op[2])
            pod["metadata"]["name"] = f"pod-{op[1]}"
            for store in (plain, packed):
                store.put(store.make_entry(orjson.loads(orjson.dumps(pod))))
        elif op[0] == "delete":
            for store in (plain, packed):
                store.delete(f"ns-0/pod-{op[1]}")
        else:
            pods = _pods(op[1], seed=op[2])
            for store in (plain, packed):
                store.replace([store.make_entry(orjson.loads(orjson.dumps(p))) for p in pods], 1)
    assert sorted(plain.keys()) == sorted(packed.keys())
    keys = sorted(plain.keys())
    assert [bytes(b) for b in bodies(packed.get_many(keys))] == [
        bytes(b) for b in bodies(plain.get_many(keys))
    ]
    for node in (f"node-{i}" for i in range(5)):
        assert packed.index_keys("spec.nodeName", node) == plain.index_keys("spec.nodeName", node)
    for app in (f"app-{i}" for i in range(4)):
        assert packed.label_keys("app", app) == plain.label_keys("app", app)
    held = sum(len(e.packed) for e in packed.entries() if isinstance(e, PackedEntry))
    assert packed.packed_bytes == held and plain.packed_bytes == 0


@settings(max_examples=40, deadline=None)
@given(count=st.integers(0, 2600), builtin=st.booleans(), compressed=st.booleans())
def test_a_list_in_groups_is_the_list_in_one_piece(
    count: int, builtin: bool, compressed: bool
) -> None:
    """The streamed form of a list (groups of parts, bodies made per group) has the bytes and
    the length of the list in one piece, for typed and custom kinds, packed or not."""
    pods = _pods(min(count, 60))
    store = _filled(SMALL if compressed else None, pods)
    entries = list(store.entries())
    items = [entries[i % len(entries)] for i in range(count)] if entries else []
    rtype = builtin_type("pods") if builtin else WIDGETS
    page = ServedList(rtype, items, 42, continue_token="abc" if count % 2 else "")
    whole = b"".join(page.parts())
    assert b"".join(b"".join(g) for g in page.groups()) == whole
    assert page.length() == len(whole)
    assert orjson.loads(whole)["metadata"]["resourceVersion"] == "42"
