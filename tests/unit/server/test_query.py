"""The index-narrowed query equals the full scan, exact shortcuts included (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.informer import Store
from cacheproxy.kube.fields import parse_field_selector
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.resources import ResourceType, builtin
from cacheproxy.server.query import Query, matches, parse_index_selector
from cacheproxy.server.resource import ServedResource

PODS = builtin("pods")
WIDGETS = ResourceType("example.com", "v1", "widgets", "Widget", namespaced=True)
INDEXES = ("spec.nodeName",)


class _Informer:
    def __init__(self, store: Store) -> None:
        self.store = store

    def subscribe(self, subscriber: Any) -> None:
        pass


pods = st.lists(
    st.fixed_dictionaries(
        {
            "ns": st.sampled_from(["ns-a", "ns-b", "ns-c"]),
            "name": st.sampled_from([f"p{i}" for i in range(12)]),
            "app": st.sampled_from(["a", "b", "c", None]),
            "tier": st.sampled_from(["web", "db", None]),
            "node": st.sampled_from(["n1", "n2", "", None]),
            "phase": st.sampled_from(["Running", "Pending"]),
        }
    ),
    max_size=30,
)
LABELS = [
    "", "app=a", "app==b", "app!=a", "app in (a,b)", "app notin (c)", "app", "!app",
    "app=a,tier=web", "tier in (web,db),app!=b", "app=zzz", "app,tier",
]  # fmt: skip
FIELDS = [
    "", "spec.nodeName=n1", "spec.nodeName=", "spec.nodeName!=n2", "metadata.namespace=ns-a",
    "metadata.namespace=", "metadata.name=p1", "metadata.name!=p2", "status.phase=Running",
    "spec.nodeName=n1,metadata.namespace=ns-b", "metadata.name=p3,spec.nodeName=n2",
]  # fmt: skip
INDEX = ["", "spec.nodeName=n1", "spec.nodeName in (n1,n2)", "spec.nodeName", "spec.nodeName!=n1"]


def pod(p: dict[str, Any]) -> dict[str, Any]:
    labels = {k: p[k] for k in ("app", "tier") if p[k] is not None}
    spec: dict[str, Any] = {"containers": []}
    if p["node"] is not None:
        spec["nodeName"] = p["node"]
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": p["name"], "namespace": p["ns"], "labels": labels},
        "spec": spec,
        "status": {"phase": p["phase"]},
    }


@settings(max_examples=300, deadline=None)
@given(
    items=pods,
    namespace=st.sampled_from([None, "ns-a", "ns-c"]),
    namespaces=st.sampled_from([None, frozenset({"ns-a"}), frozenset({"ns-b", "ns-c"})]),
    labels=st.sampled_from(LABELS),
    fields=st.sampled_from(FIELDS),
    index=st.sampled_from(INDEX),
)
def test_current_keys_equal_a_full_scan(
    items: list[dict[str, Any]],
    namespace: str | None,
    namespaces: frozenset[str] | None,
    labels: str,
    fields: str,
    index: str,
) -> None:
    store = Store(kind="Pod", api_version="v1", field_indexes=INDEXES)
    for p in items:
        store.put(store.make_entry(pod(p)))
    res = ServedResource(PODS, _Informer(store), index_paths=set(INDEXES))  # type: ignore[arg-type]
    query = Query(
        namespace=namespace,
        labels=parse_label_selector(labels),
        fields=parse_field_selector(fields),
        index=parse_index_selector(index, INDEXES) if index else Query().index,
        namespaces=namespaces,
    )
    scan = [
        key
        for key in store.sorted_keys(namespace=namespace)
        if (entry := store.get(key)) is not None and matches(entry, query, PODS, store)
    ]
    assert res.current_keys(query) == scan


_changes = st.lists(
    st.one_of(
        st.tuples(st.just("put"), pods),
        st.tuples(st.just("delete"), st.lists(st.integers(0, 29), min_size=1, max_size=8)),
        st.tuples(st.just("relist"), pods),
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(
    items=pods,
    changes=_changes,
    # Mostly one selector resolved by one index set, walked in the order the store keeps.
    selectors=st.one_of(
        st.sampled_from(
            [
                ("app=a", "", ""),
                ("tier=web", "", ""),
                ("", "spec.nodeName=n1", ""),
                ("", "", "spec.nodeName=n2"),
                ("app=b", "spec.nodeName=n1", ""),
            ]
        ),
        st.tuples(st.sampled_from(LABELS), st.sampled_from(FIELDS), st.sampled_from(INDEX)),
    ),
)
def test_index_answers_stay_equal_to_a_full_scan_while_the_store_changes(
    items: list[dict[str, Any]],
    changes: list[tuple[str, Any]],
    selectors: tuple[str, str, str],
) -> None:
    """The store keeps index sets in key order between queries: every change must drop what
    it touched (puts that move an object between sets, deletes, relists)."""
    labels, fields, index = selectors
    store = Store(kind="Pod", api_version="v1", field_indexes=INDEXES)
    for p in items:
        store.put(store.make_entry(pod(p)))
    res = ServedResource(PODS, _Informer(store), index_paths=set(INDEXES))  # type: ignore[arg-type]
    query = Query(
        labels=parse_label_selector(labels),
        fields=parse_field_selector(fields),
        index=parse_index_selector(index, INDEXES) if index else Query().index,
    )
    for op, arg in [("query", None), *changes]:
        if op == "put":
            for p in arg:
                store.put(store.make_entry(pod(p)))
        elif op == "delete":
            keys = list(store.sorted_keys())
            for d in arg:
                if keys:
                    store.delete(keys[d % len(keys)])
        elif op == "relist":
            store.replace([store.make_entry(pod(p)) for p in arg], 1)
        scan = [
            key
            for key in store.sorted_keys()
            if (entry := store.get(key)) is not None and matches(entry, query, PODS, store)
        ]
        assert res.current_keys(query) == scan


@settings(max_examples=100, deadline=None)
@given(
    items=pods,
    custom=st.booleans(),
    token=st.sampled_from(["", "abc"]),
)
def test_a_list_body_is_the_items_as_the_api_server_lists_them(
    items: list[dict[str, Any]], custom: bool, token: str
) -> None:
    """Typed lists of built-in kinds carry items without kind/apiVersion; lists of custom
    resources carry them in every item."""
    import orjson

    from cacheproxy.server.resource import ServedList

    rtype = WIDGETS if custom else PODS
    store = Store(kind=rtype.kind, api_version=rtype.api_version, field_indexes=INDEXES)
    for p in items:
        store.put(store.make_entry({**pod(p), "kind": rtype.kind, "apiVersion": rtype.api_version}))
    entries = [e for k in store.sorted_keys() if (e := store.get(k)) is not None]
    page = ServedList(rtype, entries, 7, continue_token=token, remaining=3 if token else None)
    doc = orjson.loads(page.body())
    assert doc["kind"] == f"{rtype.kind}List" and doc["apiVersion"] == rtype.api_version
    assert doc["metadata"].get("continue", "") == token
    assert [i["metadata"]["name"] for i in doc["items"]] == [e.key.split("/")[1] for e in entries]
    assert [i.get("spec") for i in doc["items"]] == [e.object()["spec"] for e in entries]
    typed = {"kind": rtype.kind, "apiVersion": rtype.api_version}
    assert all(
        {k: i.get(k) for k in typed} == (typed if custom else dict.fromkeys(typed))
        for i in doc["items"]
    )
