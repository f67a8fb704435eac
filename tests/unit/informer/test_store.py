"""The Store: transforms, entries, indexes that answer exactly what a full scan answers."""

from __future__ import annotations

import copy
import sys
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.informer import Entry, Store, Transform
from cacheproxy.kube.fieldpath import compile_field_path


def _pod(name: str, ns: str = "default", **kw: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": str(kw.get("rv", 1))}
    if "labels" in kw:
        meta["labels"] = kw["labels"]
    meta["managedFields"] = [{"manager": "kubectl"}]
    spec: dict[str, Any] = {"nodeName": kw.get("node", "n1")}
    spec["containers"] = [{"name": c, "image": f"img-{c}"} for c in kw.get("containers", ["main"])]
    return {"metadata": meta, "spec": spec, "status": {"phase": kw.get("phase", "Running")}}


def _store(**kw: Any) -> Store:
    return Store(
        kind="Pod",
        api_version="v1",
        field_indexes=("spec.nodeName", "spec.containers[*].image"),
        **kw,
    )


def test_entries_keep_compact_json_without_managed_fields_and_with_kind_first() -> None:
    store = _store()
    entry = store.make_entry(_pod("a", labels={"app": "x"}, rv=7))
    assert entry.key == "default/a"
    assert entry.rv == 7
    assert entry.namespace == "default" and entry.name == "a"
    assert entry.label_map() == {"app": "x"}
    obj = orjson.loads(entry.raw)
    assert list(obj)[:3] == ["kind", "apiVersion", "metadata"]
    assert obj["kind"] == "Pod" and obj["apiVersion"] == "v1"
    assert "managedFields" not in obj["metadata"]
    assert entry.raw == orjson.dumps(obj)  # compact


def test_an_entry_keeps_the_type_once_per_store_and_the_rest_as_its_body() -> None:
    store = _store()
    first, second = store.make_entry(_pod("a")), store.make_entry(_pod("b"))
    assert first.prefix == b'{"kind":"Pod","apiVersion":"v1",'
    assert first.prefix is second.prefix  # one bytes object for the whole store
    assert first.body.startswith(b'"metadata":') and first.body.endswith(b"}")
    assert first.raw == first.prefix + first.body
    assert first.size == len(first.raw)
    assert orjson.loads(b"{" + first.body)["metadata"]["name"] == "a"  # the typed list item
    assert first.same_object(store.make_entry(_pod("a")))
    assert not first.same_object(second)


def test_an_object_of_another_type_or_with_nothing_but_its_type_stays_valid_json() -> None:
    store = _store()
    other = store.make_entry({"kind": "Thing", "apiVersion": "x/v1", "metadata": {"name": "t"}})
    assert orjson.loads(other.raw) == {
        "kind": "Thing",
        "apiVersion": "x/v1",
        "metadata": {"name": "t"},
    }
    assert other.prefix != store.make_entry(_pod("a")).prefix
    bare = store.make_entry({})
    assert orjson.loads(bare.raw) == {"kind": "Pod", "apiVersion": "v1"}
    assert orjson.loads(b"{" + bare.body) == {}


def test_metadata_only_transform_keeps_kind_api_version_and_metadata() -> None:
    store = _store(transform=Transform(metadata_only=True))
    obj = orjson.loads(store.make_entry(_pod("a")).raw)
    assert list(obj) == ["kind", "apiVersion", "metadata"]


def test_custom_drop_paths() -> None:
    store = _store(transform=Transform(drop_fields=("status", "spec.containers")))
    obj = orjson.loads(store.make_entry(_pod("a")).raw)
    assert "status" not in obj
    assert obj["spec"] == {"nodeName": "n1"}
    assert obj["metadata"]["managedFields"] == [{"manager": "kubectl"}]


def test_python_index_functions_index_parsed_objects() -> None:
    store = _store(indexers={"phase": lambda o: [o["status"]["phase"]]})
    store.put(store.make_entry(_pod("a", phase="Pending")))
    store.put(store.make_entry(_pod("b", phase="Running")))
    assert store.index_keys("phase", "Pending") == {"default/a"}
    store.put(store.make_entry(_pod("a", phase="Running")))
    assert store.index_keys("phase", "Running") == {"default/a", "default/b"}
    assert "Pending" not in store.index_values("phase")


def test_replace_swaps_the_whole_state_and_returns_the_old_one() -> None:
    store = _store()
    store.put(store.make_entry(_pod("a", node="n1")))
    store.put(store.make_entry(_pod("b", node="n2")))
    old = store.replace([store.make_entry(_pod("c", node="n1"))], 42)
    assert set(old) == {"default/a", "default/b"}
    assert list(store.keys()) == ["default/c"]
    assert store.index_keys("spec.nodeName", "n1") == {"default/c"}
    assert store.index_keys("spec.nodeName", "n2") == set()
    assert store.resource_version == 42


def test_replace_indexes_as_putting_each_entry_in_turn_would() -> None:
    pods = [
        _pod("a", labels={"app": "web", "tier": "x"}, node="n1", containers=["c1", "c2"]),
        _pod("b", "other", labels={"app": "web"}, node="n2"),
        _pod("c", labels={"app": "db", "tier": "x"}, node="n1", containers=["c2"]),
        _pod("d", node="n1", containers=[]),
    ]
    replaced, put = _store(), _store()
    replaced.replace([replaced.make_entry(copy.deepcopy(p)) for p in pods], 3)
    for p in pods:
        put.put(put.make_entry(copy.deepcopy(p)))
    for key in ("app", "tier"):
        values = replaced.label_values(key)
        assert {v: list(k) for v, k in values.items()} == {
            v: list(k) for v, k in put.label_values(key).items()
        }
    for index in replaced.index_names:
        assert {v: list(k) for v, k in replaced.index_values(index).items()} == {
            v: list(k) for v, k in put.index_values(index).items()
        }
    assert list(replaced.sorted_keys()) == list(put.sorted_keys())


def test_replace_with_a_key_listed_twice_keeps_the_last_and_only_its_index_values() -> None:
    store = _store()
    first = store.make_entry(_pod("a", labels={"app": "web"}, node="n1"))
    other = store.make_entry(_pod("b", labels={"app": "web"}, node="n1"))
    last = store.make_entry(_pod("a", labels={"app": "db"}, node="n2"))
    store.replace([first, other, last], 5)
    assert store.get("default/a") is last
    assert len(store) == 2 and list(store.sorted_keys()) == ["default/a", "default/b"]
    assert store.label_keys("app", "web") == {"default/b"}
    assert store.label_keys("app", "db") == {"default/a"}
    assert store.index_keys("spec.nodeName", "n1") == {"default/b"}
    assert store.index_keys("spec.nodeName", "n2") == {"default/a"}


def test_an_entry_returned_earlier_stays_valid_after_the_object_changes() -> None:
    store = _store()
    store.put(store.make_entry(_pod("a", labels={"v": "1"}, rv=1)))
    first = store.get("default/a")
    assert first is not None
    store.put(store.make_entry(_pod("a", labels={"v": "2"}, rv=2)))
    assert first.label_map() == {"v": "1"} and first.rv == 1
    assert orjson.loads(first.raw)["metadata"]["labels"] == {"v": "1"}


def test_label_strings_are_interned_so_objects_share_them() -> None:
    store = _store()
    a = store.make_entry(_pod("a", labels={"app": "web"}))
    b = store.make_entry(_pod("b", labels={"app": "web"}))
    assert a.labels[1] is b.labels[1]
    assert sys.getsizeof(a.labels) < 100


# ---------------------------------------------------------------------- property: index == scan

names = st.sampled_from(["a", "b", "c", "d", "e"])
namespaces = st.sampled_from(["ns1", "ns2"])
label_maps = st.dictionaries(
    st.sampled_from(["app", "tier"]), st.sampled_from(["x", "y"]), max_size=2
)
nodes = st.sampled_from(["n1", "n2", "n3"])
images = st.lists(st.sampled_from(["c1", "c2", "c3"]), min_size=0, max_size=3, unique=True)
op = st.one_of(
    st.tuples(st.just("put"), names, namespaces, label_maps, nodes, images),
    st.tuples(st.just("delete"), names, namespaces),
    st.tuples(
        st.just("replace"),
        st.lists(st.tuples(names, namespaces, label_maps, nodes, images), max_size=6),
    ),
)


def _scan_label(model: dict[str, dict[str, Any]], key: str, value: str) -> set[str]:
    return {k for k, o in model.items() if (o["metadata"].get("labels") or {}).get(key) == value}


@settings(max_examples=200, deadline=None)
@given(st.lists(op, max_size=40))
def test_every_index_answers_exactly_what_a_full_scan_answers(ops: list[tuple[Any, ...]]) -> None:
    store = _store()
    model: dict[str, dict[str, Any]] = {}
    for o in ops:
        if o[0] == "put":
            _, name, ns, labels, node, imgs = o
            obj = _pod(name, ns, labels=labels, node=node, containers=imgs)
            model[f"{ns}/{name}"] = copy.deepcopy(obj)
            store.put(store.make_entry(obj))
        elif o[0] == "delete":
            _, name, ns = o
            model.pop(f"{ns}/{name}", None)
            store.delete(f"{ns}/{name}")
        else:
            model = {}
            entries: list[Entry] = []
            for name, ns, labels, node, imgs in o[1]:
                obj = _pod(name, ns, labels=labels, node=node, containers=imgs)
                model[f"{ns}/{name}"] = copy.deepcopy(obj)
                entries = [e for e in entries if e.key != f"{ns}/{name}"]
                entries.append(store.make_entry(obj))
            store.replace(entries, 1)
    assert set(store.keys()) == set(model)
    for ns in ("ns1", "ns2"):
        assert store.namespace_keys(ns) == {k for k in model if k.startswith(ns + "/")}
    for key in ("app", "tier"):
        for value in ("x", "y"):
            assert store.label_keys(key, value) == _scan_label(model, key, value)
        assert set(store.label_values(key)) == {
            (o["metadata"].get("labels") or {})[key]
            for o in model.values()
            if key in (o["metadata"].get("labels") or {})
        }
    for path in ("spec.nodeName", "spec.containers[*].image"):
        extract = compile_field_path(path)
        values = {v for o in model.values() for v in extract(o)}
        assert set(store.index_values(path)) == values
        for value in values:
            assert store.index_keys(path, value) == {
                k for k, o in model.items() if value in extract(o)
            }
