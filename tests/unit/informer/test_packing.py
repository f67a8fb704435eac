"""Compressed storage: a packed store holds and gives back exactly what a plain store does."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cacheproxy.informer import Storage, Store
from cacheproxy.informer import store as store_module
from cacheproxy.informer.packing import JOINER, share
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
    blocks = {id(e.packed): e.packed for e in packed.entries() if isinstance(e, PackedEntry)}
    assert sorted(block[0] for block in blocks.values()) == [8] * 25, "in blocks of 8"
    stored = sum(map(len, blocks.values()))
    assert stored * 4 < sum(e.size for e in plain.entries()), "packed well below the JSON"
    assert packed.packed_bytes <= stored < packed.packed_bytes + 8 * len(blocks)


def test_a_relist_packs_the_list_it_was_given_so_no_plain_copy_outlives_it() -> None:
    store = _store(SMALL)
    entries = [store.make_entry(p) for p in _pods(100)]
    store.replace(entries, 1)
    assert all(isinstance(e, PackedEntry) for e in entries)
    assert all(store.get(e.key) is e for e in entries)


@pytest.mark.parametrize("at_once", [1024, 7])
def test_a_relist_keeps_the_stored_entry_of_each_unchanged_object_and_packs_the_rest(
    at_once: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "_COMPARED_AT_ONCE", at_once)  # compared in slices
    pods = _pods(100)
    store = _filled(SMALL, pods)
    before = {e.key: e for e in store.entries()}
    again = [orjson.loads(orjson.dumps(p)) for p in pods[:98]]  # pod-98, pod-99 deleted
    for pod in again[10:13]:  # changed
        pod["metadata"]["resourceVersion"] = "5000"
    again += _pods(2, seed=7, rv=6000)  # new: pod-0, pod-1 again, now changed
    for i, pod in enumerate(again[-2:]):
        pod["metadata"]["name"] = f"pod-new-{i}"
    entries = [store.make_entry(p) for p in again]
    old = store.replace(entries, 200)
    changed = {"ns-1/pod-10", "ns-2/pod-11", "ns-0/pod-12", "ns-0/pod-new-0", "ns-1/pod-new-1"}
    for entry in entries:
        assert isinstance(entry, PackedEntry)
        if entry.key in changed:
            assert entry.key not in old or not entry.same_object(old[entry.key])
            rv = orjson.loads(entry.raw)["metadata"]["resourceVersion"]
            assert rv in ("5000", "6000", "6001")
        else:
            assert entry is before[entry.key], entry.key  # kept, its block with it
    plain = _filled(None, again)
    keys = sorted(plain.keys())
    assert [bytes(b) for b in bodies(store.get_many(keys))] == [
        bytes(b) for b in bodies(plain.get_many(keys))
    ]


def test_a_block_gives_each_of_its_objects_alone_and_in_any_selection() -> None:
    pods = _pods(120)
    plain, packed = _filled(None, pods), _filled(SMALL, pods)
    keys = sorted(plain.keys())
    for key in keys:
        mine, want = packed.get(key), plain.get(key)
        assert mine is not None and want is not None
        assert mine.body == want.body and mine.size == want.size
    rng = random.Random(3)
    for count in (2, 9, 70, 200):  # members out of order, apart, asked for twice
        chosen = [rng.choice(keys) for _ in range(count)]
        want = [bytes(b) for b in bodies(plain.get_many(chosen))]
        assert [bytes(b) for b in bodies(packed.get_many(chosen))] == want
        assert [bytes(b) for b in bodies(packed.get_many(chosen), off_loop={})] == want
    # Runs of a block's objects come joined as a list writes them, in fewer pieces.
    for chosen in (keys, keys[3:50], keys[::2], [rng.choice(keys) for _ in range(90)]):
        want_list = JOINER.join(bodies(plain.get_many(chosen)))
        runs = bodies(packed.get_many(chosen), joined=True)
        assert JOINER.join(runs) == want_list
        assert JOINER.join(bodies(packed.get_many(chosen), off_loop={}, joined=True)) == want_list
        if chosen is keys:
            assert len(runs) == len(keys) // 8, "a whole block in one piece"


def test_blocks_of_one_pack_each_object_alone() -> None:
    alone = Storage(
        compressed=True, training_bytes=64 << 10, min_training_objects=16, block_objects=1
    )
    pods = _pods(60)
    store, plain = _filled(alone, pods), _filled(None, pods)
    assert all(isinstance(e, PackedEntry) and e.packed[0] == 1 for e in store.entries())
    keys = sorted(plain.keys())
    assert [bytes(b) for b in bodies(store.get_many(keys))] == [
        bytes(b) for b in bodies(plain.get_many(keys))
    ]
    for count in (0, 256):
        with pytest.raises(ValueError, match="block_objects is 1 to 255"):
            Storage(compressed=True, block_objects=count)


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
    held = sum(share(e.packed) for e in packed.entries() if isinstance(e, PackedEntry))
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
