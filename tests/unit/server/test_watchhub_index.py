"""The WatchHub's fan-out by index: an event is offered only to the watchers under the values of
its new and previous state (namespace, a configured field index, a label) and to those with no
such value — and every watcher gets exactly what offering every event to every watcher gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.informer import Changed, Store
from cacheproxy.kube.fields import parse_field_selector
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.resources import builtin
from cacheproxy.server.query import Query
from cacheproxy.server.watchhub import ServedWatch, WatchHub, fanout_key

PODS = builtin("pods")


def _store() -> Store:
    return Store(kind="Pod", api_version="v1", field_indexes=["spec.nodeName"])


def query(namespace: str | None = None, fields: str = "", labels: str = "") -> Query:
    return Query(
        namespace=namespace,
        fields=parse_field_selector(fields),
        labels=parse_label_selector(labels),
    )


class Pods:
    """Changes to one store of pods, as the informer applies them, each handed to the hubs."""

    def __init__(self, store: Store, *hubs: WatchHub) -> None:
        self.store = store
        self.hubs = hubs
        self.rv = 0

    def put(self, ns: str, name: str, node: str | None, app: str | None) -> None:
        self.rv += 1
        meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": str(self.rv)}
        if app is not None:
            meta["labels"] = {"app": app}
        obj: dict[str, Any] = {"metadata": meta, "spec": {}}
        if node is not None:
            obj["spec"]["nodeName"] = node
        entry = self.store.make_entry(obj)
        prev = self.store.put(entry, rv=self.rv)
        self._apply(Changed(self.rv, "MODIFIED" if prev else "ADDED", entry, prev, 0))

    def delete(self, ns: str, name: str) -> None:
        prev = self.store.get(f"{ns}/{name}")
        if prev is None:
            return
        self.rv += 1
        obj = prev.object()
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.store.delete(prev.key, rv=self.rv)
        self._apply(Changed(self.rv, "DELETED", self.store.make_entry(obj), prev, 0))

    def _apply(self, event: Changed) -> None:
        for hub in self.hubs:
            hub.on_event(event)


def test_what_a_query_pins_is_where_the_hub_keeps_its_watcher() -> None:
    store = _store()
    assert fanout_key(query(fields="spec.nodeName=n1"), store) == (("field", "spec.nodeName"), "n1")
    assert fanout_key(query(labels="app in (x)"), store) == (("label", "app"), "x")
    assert fanout_key(query("ns-a"), store) == (("namespace", ""), "ns-a")
    assert fanout_key(query(fields="metadata.namespace=ns-b"), store) == (
        ("namespace", ""),
        "ns-b",
    )
    # Nothing single-valued and indexed: offered every event.
    for unpinned in (
        query(),
        query(fields="spec.nodeName!=n1"),
        query(fields="spec.nodeName="),  # also objects without the field, which no index holds
        query(fields="status.phase=Running"),  # not a configured index
        query(labels="app in (x,y)"),
        query(labels="app!=x"),
    ):
        assert fanout_key(unpinned, store) is None, unpinned


def test_an_object_moving_between_nodes_reaches_the_watchers_of_both() -> None:
    store = _store()
    hub = WatchHub(PODS, store)
    on_a = ServedWatch(query(fields="spec.nodeName=a"), buffer=10)
    on_b = ServedWatch(query(fields="spec.nodeName=b"), buffer=10)
    on_c = ServedWatch(query(fields="spec.nodeName=c"), buffer=10)
    for watcher in (on_a, on_b, on_c):
        hub.add(watcher)
    pods = Pods(store, hub)
    pods.put("ns", "p", "a", None)
    pods.put("ns", "p", "b", None)
    pods.delete("ns", "p")
    assert [line.split(b'"')[3] for line in on_a.take()] == [b"ADDED", b"DELETED"]
    assert [line.split(b'"')[3] for line in on_b.take()] == [b"ADDED", b"DELETED"]
    assert on_c.take() == []


def test_a_watcher_under_another_value_is_not_even_offered_the_event() -> None:
    store = _store()
    indexed, scanning = WatchHub(PODS, store), WatchHub(PODS, store)
    scanning.indexed = False
    elsewhere = [ServedWatch(query(fields="spec.nodeName=b"), buffer=10) for _ in range(2)]
    indexed.add(elsewhere[0])
    scanning.add(elsewhere[1])
    for watcher in elsewhere:
        watcher.close("client went away")  # a watcher looked at is dropped once closed
    Pods(store, indexed, scanning).put("ns", "p", "a", None)
    assert elsewhere[0] in indexed.watchers  # never looked at
    assert elsewhere[1] not in scanning.watchers


def test_a_removed_watcher_leaves_its_index() -> None:
    store = _store()
    hub = WatchHub(PODS, store)
    watcher = ServedWatch(query(fields="spec.nodeName=a"), buffer=10)
    hub.add(watcher)
    hub.remove(watcher)
    Pods(store, hub).put("ns", "p", "a", None)
    assert watcher.take() == [] and not hub.watchers


QUERIES = st.sampled_from(
    [
        query(),
        query("ns-a"),
        query("ns-b"),
        query(fields="spec.nodeName=n1"),
        query(fields="spec.nodeName=n2"),
        query(fields="spec.nodeName!=n1"),
        query(fields="spec.nodeName="),
        query(fields="metadata.namespace=ns-a"),
        query(fields="metadata.name=p1"),
        query(labels="app=x"),
        query(labels="app==y"),
        query(labels="app in (x,y)"),
        query(labels="app!=x"),
        query(labels="app"),
        query("ns-a", fields="spec.nodeName=n1"),
        query("ns-b", labels="app=x"),
        query(fields="spec.nodeName=n2", labels="app=y"),
    ]
)
MAYBE = st.none() | st.sampled_from(["x", "y"])
CHANGES = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.sampled_from(["ns-a", "ns-b"]),
            st.sampled_from(["p1", "p2", "p3"]),
            st.none() | st.sampled_from(["n1", "n2"]),
            MAYBE,
        ),
        st.tuples(
            st.just("delete"),
            st.sampled_from(["ns-a", "ns-b"]),
            st.sampled_from(["p1", "p2", "p3"]),
        ),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    before=CHANGES,
    watchers=st.lists(st.tuples(QUERIES, st.integers(0, 10), st.integers(1, 30)), max_size=12),
    after=CHANGES,
)
def test_indexed_delivery_is_exactly_what_a_scan_delivers(
    before: list[tuple[Any, ...]],
    watchers: list[tuple[Query, int, int]],
    after: list[tuple[Any, ...]],
) -> None:
    store = _store()
    indexed, scanning = WatchHub(PODS, store), WatchHub(PODS, store)
    scanning.indexed = False
    pods = Pods(store, indexed, scanning)

    def run(changes: list[tuple[Any, ...]]) -> None:
        for change in changes:
            if change[0] == "put":
                pods.put(*change[1:])
            else:
                pods.delete(*change[1:])

    run(before)
    pairs = []
    for q, min_rv, buffer in watchers:  # small buffers: evictions must agree too
        pair = (
            ServedWatch(q, buffer=buffer, min_rv=min_rv),
            ServedWatch(q, buffer=buffer, min_rv=min_rv),
        )
        indexed.add(pair[0])
        scanning.add(pair[1])
        pairs.append(pair)
    run(after)
    for mine, theirs in pairs:
        assert mine.take() == theirs.take()
        assert (mine.closed, mine.overflow, mine.last_rv) == (
            theirs.closed,
            theirs.overflow,
            theirs.last_rv,
        )
    assert indexed.evictions == scanning.evictions
    assert indexed.delivered == scanning.delivered
    assert indexed.watchers == {m for m, _ in pairs if not m.closed}
