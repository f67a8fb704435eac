"""The WatchHub's fan-out: what each watcher gets of each event (the transition rule, its start),
the line bytes built once and shared, buffers bounded in events (in bytes:
``test_watchhub_bytes.py``), and a relist's difference.

History replay decides with the same function as the live fan-out: a property test checks that a
watch resumed from the history sees exactly what a connected one saw.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.informer import Changed, Entry, Relisted, Store
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.resources import builtin
from cacheproxy.kube.transitions import Seen, seen
from cacheproxy.server.query import Query
from cacheproxy.server.watchfilter import relist_events, replay_lines
from cacheproxy.server.watchhub import ServedWatch, WatchHub

CONFIGMAPS = builtin("configmaps")


def _store() -> Store:
    return Store(kind="ConfigMap", api_version="v1")


def cm(store: Store, name: str, rv: int, color: str | None = None) -> Entry:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "resourceVersion": str(rv)}
    if color is not None:
        meta["labels"] = {"color": color}
    return store.make_entry({"metadata": meta, "data": {"rv": str(rv)}})


def red() -> Query:
    return Query(labels=parse_label_selector("color=red"))


def events_of(lines: list[bytes]) -> list[tuple[str, str, int]]:
    out = []
    for line in lines:
        event = orjson.loads(line)
        meta = event["object"]["metadata"]
        out.append((event["type"], meta.get("name", ""), int(meta["resourceVersion"])))
    return out


class Changes:
    """Changes to one store, as the informer applies them, each handed to the hub."""

    def __init__(self, hub: WatchHub) -> None:
        self.hub = hub
        self.store = hub.store
        self.rv = 0
        self.log: list[Changed] = []

    def put(self, name: str, color: str | None = None) -> Changed:
        self.rv += 1
        entry = cm(self.store, name, self.rv, color)
        prev = self.store.put(entry, rv=self.rv)
        return self._applied(Changed(self.rv, "MODIFIED" if prev else "ADDED", entry, prev, 0))

    def delete(self, name: str) -> Changed:
        self.rv += 1
        prev = self.store.get(f"default/{name}")
        assert prev is not None
        obj = prev.object()
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.store.delete(prev.key, rv=self.rv)
        return self._applied(Changed(self.rv, "DELETED", self.store.make_entry(obj), prev, 0))

    def _applied(self, event: Changed) -> Changed:
        self.log.append(event)
        self.hub.on_event(event)
        return event


@pytest.fixture
def hub() -> WatchHub:
    return WatchHub(CONFIGMAPS, _store())


# ---------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("event_type", "before", "now", "expected"),
    [
        ("ADDED", False, True, Seen.ADDED),
        ("ADDED", False, False, None),
        ("MODIFIED", True, True, Seen.MODIFIED),
        ("MODIFIED", False, True, Seen.ADDED),
        ("MODIFIED", True, False, Seen.LEFT),
        ("MODIFIED", False, False, None),
        ("DELETED", True, False, Seen.DELETED),
        ("DELETED", True, True, Seen.DELETED),
        ("DELETED", False, False, None),
    ],
)
def test_the_transition_rule(event_type: str, before: bool, now: bool, expected: Seen) -> None:
    assert seen(event_type, matched_before=before, matches_now=now) is expected


def test_an_object_moving_through_a_selector_is_added_modified_then_deleted(
    hub: WatchHub,
) -> None:
    watcher = ServedWatch(red(), buffer=100)
    hub.add(watcher)
    changes = Changes(hub)
    changes.put("a", "blue")  # never matched: nothing
    changes.put("a", "red")  # comes in
    changes.put("a", "red")  # stays
    changes.put("a", "blue")  # leaves: DELETED, the old object at this RV
    changes.put("b", "red")
    changes.delete("b")  # deleted while matching
    assert events_of(watcher.take()) == [
        ("ADDED", "a", 2),
        ("MODIFIED", "a", 3),
        ("DELETED", "a", 4),
        ("ADDED", "b", 5),
        ("DELETED", "b", 6),
    ]


def test_the_object_that_left_is_the_previous_one_restamped(hub: WatchHub) -> None:
    watcher = ServedWatch(red(), buffer=100)
    changes = Changes(hub)
    changes.put("a", "red")
    hub.add(watcher)
    changes.put("a", "blue")
    [line] = watcher.take()
    event = orjson.loads(line)
    assert event["type"] == "DELETED"
    assert event["object"]["metadata"]["labels"] == {"color": "red"}
    assert event["object"]["metadata"]["resourceVersion"] == "2"
    assert event["object"]["data"] == {"rv": "1"}


def test_a_watcher_gets_only_events_after_its_start(hub: WatchHub) -> None:
    watcher = ServedWatch(Query(), buffer=100, min_rv=2)
    hub.add(watcher)
    changes = Changes(hub)
    for name in ("a", "b", "c"):
        changes.put(name)
    assert events_of(watcher.take()) == [("ADDED", "c", 3)]
    assert watcher.last_rv == 3


def test_each_line_is_built_once_and_shared_by_every_watcher(hub: WatchHub) -> None:
    first, second = ServedWatch(Query(), buffer=10), ServedWatch(red(), buffer=10)
    hub.add(first)
    hub.add(second)
    Changes(hub).put("a", "red")
    [one], [other] = first.take(), second.take()
    assert one is other
    assert hub.delivered == 2


# ---------------------------------------------------------------------------- bounds


def test_a_watcher_whose_buffer_is_full_is_evicted_and_the_others_go_on(hub: WatchHub) -> None:
    slow, fast = ServedWatch(Query(), buffer=2), ServedWatch(Query(), buffer=100)
    hub.add(slow)
    hub.add(fast)
    changes = Changes(hub)
    for name in ("a", "b", "c", "d"):
        changes.put(name)
    assert slow.closed and slow.close_reason == "too slow: buffer full"
    assert slow not in hub.watchers and hub.evicted == 1
    assert hub.evictions == {"events": 1, "bytes": 0, "total_bytes": 0, "stall": 0}
    assert [e[1] for e in events_of(slow.take())] == ["a", "b"]
    assert [e[1] for e in events_of(fast.take())] == ["a", "b", "c", "d"]


def test_a_closed_watcher_is_dropped_without_counting_an_eviction(hub: WatchHub) -> None:
    watcher = ServedWatch(Query(), buffer=10)
    hub.add(watcher)
    watcher.close("client went away")
    Changes(hub).put("a")
    assert watcher not in hub.watchers and hub.evicted == 0


def test_evicting_counts_a_watcher_once(hub: WatchHub) -> None:
    watcher = ServedWatch(Query(), buffer=10)
    hub.add(watcher)
    hub.evict(watcher, "stall", "took nothing for 10 s")
    hub.evict(watcher, "stall", "took nothing for 10 s")
    assert watcher.close_reason == "too slow: took nothing for 10 s"
    assert hub.evicted == 1 and not hub.watchers
    assert hub.evictions == {"events": 0, "bytes": 0, "total_bytes": 0, "stall": 1}


def test_close_all_ends_every_watch(hub: WatchHub) -> None:
    watchers = [ServedWatch(Query(), buffer=10) for _ in range(3)]
    for watcher in watchers:
        hub.add(watcher)
    hub.close_all("server shutting down")
    assert not hub.watchers
    assert {w.close_reason for w in watchers} == {"server shutting down"}


# ---------------------------------------------------------------------------- relists


def test_a_relist_difference_arrives_in_rv_order_then_a_bookmark_for_those_who_asked(
    hub: WatchHub,
) -> None:
    store = hub.store
    kept, changed, gone = cm(store, "kept", 3), cm(store, "changed", 4), cm(store, "gone", 5)
    with_bookmarks = ServedWatch(Query(), buffer=100, min_rv=5, bookmarks=True)
    without = ServedWatch(Query(), buffer=100, min_rv=5)
    hub.add(with_bookmarks)
    hub.add(without)
    difference = Relisted(
        rv=12,
        before=5,
        changed=[(cm(store, "changed", 9), changed), (cm(store, "new", 7), None)],
        gone={"default/gone": gone},
    )
    assert kept  # unchanged objects are not in the difference
    hub.on_relist(difference)
    expected = [("ADDED", "new", 7), ("MODIFIED", "changed", 9), ("DELETED", "gone", 12)]
    assert events_of(with_bookmarks.take()) == [*expected, ("BOOKMARK", "", 12)]
    assert events_of(without.take()) == expected


def test_each_vanished_object_gets_a_distinct_free_rv_from_the_top() -> None:
    store = _store()
    difference = Relisted(
        rv=10,
        before=4,
        changed=[(cm(store, "changed", 10), cm(store, "changed", 2))],
        gone={f"default/g{i}": cm(store, f"g{i}", 1) for i in range(3)},
    )
    events = relist_events(difference, make_entry=store.make_entry, now=0.0, name="cms")
    assert [(e.type, e.rv) for e in events] == [
        ("DELETED", 7),
        ("DELETED", 8),
        ("DELETED", 9),
        ("MODIFIED", 10),
    ]
    assert [e.entry.rv for e in events] == [7, 8, 9, 10]  # the stored objects say so too


def test_more_deletions_than_revisions_are_stamped_at_the_relist_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _store()
    difference = Relisted(
        rv=6,
        before=5,
        changed=[(cm(store, "c", 6), None)],
        gone={f"default/g{i}": cm(store, f"g{i}", 1) for i in range(2)},
    )
    with caplog.at_level(logging.WARNING):
        events = relist_events(difference, make_entry=store.make_entry, now=0.0, name="cms")
    assert [e.rv for e in events] == [6, 6, 6]
    assert "more deletions than revisions" in caplog.text


def test_without_watchers_a_relist_costs_nothing(hub: WatchHub) -> None:
    gone = cm(hub.store, "gone", 1)
    hub.on_relist(Relisted(rv=9, before=1, changed=[], gone={"default/gone": gone}))
    assert hub.delivered == 0


# ---------------------------------------------------------------------------- replay = live

writes = st.lists(
    st.tuples(
        st.sampled_from(("put", "delete")),
        st.sampled_from(("a", "b", "c")),
        st.sampled_from(("red", "blue", None)),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(writes=writes, selector=st.sampled_from(("", "color=red", "color!=red", "!color")))
def test_a_watch_resumed_from_history_sees_what_a_connected_one_saw(
    writes: list[tuple[str, str, str | None]], selector: str
) -> None:
    hub = WatchHub(CONFIGMAPS, _store())
    query = Query(labels=parse_label_selector(selector))
    connected = ServedWatch(query, buffer=1000)
    hub.add(connected)
    changes = Changes(hub)
    for op, name, color in writes:
        if op == "put":
            changes.put(name, color)
        elif hub.store.get(f"default/{name}") is not None:
            changes.delete(name)
    assert replay_lines(changes.log, query, CONFIGMAPS, hub.store) == connected.take()
